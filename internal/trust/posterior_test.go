package trust_test

import (
	"math"
	"testing"

	"github.com/gatehouse/gatehouse/internal/trust"
)

// weights turns labels, all of one provenance, into evidence weights.
func weights(t *testing.T, prov trust.Provenance, labels ...trust.Label) []float64 {
	t.Helper()
	out := make([]float64, len(labels))
	for i, l := range labels {
		_, _, w, err := trust.Evidence{Label: l, Provenance: prov}.Weight()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = w
	}
	return out
}

func repeat(l trust.Label, n int) []trust.Label {
	out := make([]trust.Label, n)
	for i := range out {
		out[i] = l
	}
	return out
}

// quantileByBisection inverts a closed-form CDF, independently of gonum.
func quantileByBisection(cdf func(float64) float64, p float64) float64 {
	lo, hi := 0.0, 1.0
	for range 200 {
		m := (lo + hi) / 2
		if cdf(m) < p {
			lo = m
		} else {
			hi = m
		}
	}
	return (lo + hi) / 2
}

// betaA2CDF is the CDF of Beta(a, 2): (a+1)x^a − a·x^(a+1).
func betaA2CDF(a float64) func(float64) float64 {
	return func(x float64) float64 { return (a+1)*math.Pow(x, a) - a*math.Pow(x, a+1) }
}

// beta2BCDF is the CDF of Beta(2, b), by symmetry with Beta(b, 2).
func beta2BCDF(b float64) func(float64) float64 {
	return func(x float64) float64 { return 1 - betaA2CDF(b)(1-x) }
}

func TestPosterior_AgainstIndependentlyComputedValues(t *testing.T) {
	t.Parallel()
	// Reference intervals: closed-form CDFs inverted by bisection here, and
	// (for the shapes without one) mpmath's regularised incomplete beta at
	// 40 digits, inverted by bisection.
	cases := []struct {
		name             string
		weights          []float64
		alpha, beta      float64
		mean, low, high  float64
		samples          int
		closedForm       func(float64) float64
		wantTier         trust.Tier
		wantReadyDefault bool
	}{
		{name: "the prior alone", weights: nil, alpha: 2, beta: 2, mean: 0.5, low: 0.0942993240502461, high: 0.905700675949754,
			closedForm: betaA2CDF(2), wantTier: trust.TierNew},
		{name: "ten approvals by the principal", weights: weights(t, trust.ProvenancePrincipal, repeat(trust.LabelApproved, 10)...),
			alpha: 10.5, beta: 2, mean: 0.84, low: 0.601691029460979, high: 0.978197536810179, samples: 10,
			closedForm: betaA2CDF(10.5), wantTier: trust.TierLearning},
		{name: "only negative evidence", weights: weights(t, trust.ProvenancePrincipal, repeat(trust.LabelRejected, 5)...),
			alpha: 2, beta: 7, mean: 2.0 / 9, low: 0.0318540262499442, high: 0.526509670875207, samples: 5,
			closedForm: beta2BCDF(7), wantTier: trust.TierLearning},
		{name: "every label once, zero weights ignored",
			weights: weights(t, trust.ProvenancePrincipal, trust.LabelApproved, trust.LabelMinorEdit, trust.LabelEdited, trust.LabelHeavyRewrite,
				trust.LabelHeld, trust.LabelHeld), // 0.85 + 0.35 = 1.2 for; 0.15 + 0.55 = 0.7 against; two helds count nothing
			alpha: 3.2, beta: 2.7, mean: 3.2 / 5.9, samples: 4, wantTier: trust.TierLearning},
		{name: "mixed provenances", weights: append(weights(t, trust.ProvenancePrincipal, trust.LabelApproved, trust.LabelMinorEdit, trust.LabelEdited,
			trust.LabelHeavyRewrite, trust.LabelRejected, trust.LabelHeld), weights(t, trust.ProvenanceModelInferred, trust.LabelApproved)...),
			alpha: 3.285, beta: 3.7, mean: 3.285 / 6.985, low: 0.145417782923849, high: 0.811105089910909, samples: 6, wantTier: trust.TierLearning},
		{name: "model-inferred approvals weigh a tenth", weights: weights(t, trust.ProvenanceModelInferred, repeat(trust.LabelApproved, 10)...),
			alpha: 2.85, beta: 2, mean: 2.85 / 4.85, low: 0.179548237867573, high: 0.929426792210631, samples: 10,
			closedForm: betaA2CDF(2.85), wantTier: trust.TierLearning},
		{name: "thirty approvals from receipts clear the default", weights: weights(t, trust.ProvenanceReceipt, repeat(trust.LabelApproved, 30)...),
			alpha: 27.5, beta: 2, mean: 27.5 / 29.5, low: 0.819486018587509, high: 0.991385497008291, samples: 30,
			closedForm: betaA2CDF(27.5), wantTier: trust.TierReady, wantReadyDefault: true},
		{name: "one rejection more and they do not", weights: append(weights(t, trust.ProvenanceReceipt, repeat(trust.LabelApproved, 30)...),
			weights(t, trust.ProvenancePrincipal, trust.LabelRejected)...),
			alpha: 27.5, beta: 3, mean: 27.5 / 30.5, low: 0.775854595193968, high: 0.978516050332663, samples: 31, wantTier: trust.TierLearning},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := trust.ComputePosterior("tool.call.local", trust.TallyOf(c.weights), trust.DefaultThreshold, false)
			tol := 1e-9
			near := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > tol {
					t.Errorf("%s = %.15g, want %.15g", what, got, want)
				}
			}
			near("alpha", p.Alpha, c.alpha)
			near("beta", p.Beta, c.beta)
			near("mean", p.Mean, c.mean)
			if c.low != 0 {
				near("ci_low", p.CILow, c.low)
				near("ci_high", p.CIHigh, c.high)
			}
			if c.closedForm != nil {
				near("ci_low (closed form)", p.CILow, quantileByBisection(c.closedForm, 0.025))
				near("ci_high (closed form)", p.CIHigh, quantileByBisection(c.closedForm, 0.975))
			}
			near("ci_width", p.CIWidth, p.CIHigh-p.CILow)
			if p.CILow <= 0 || p.CILow >= p.Mean || p.CIHigh <= p.Mean || p.CIHigh >= 1 {
				t.Errorf("interval [%g, %g] does not hold the mean %g inside (0, 1)", p.CILow, p.CIHigh, p.Mean)
			}
			if p.Samples != c.samples || p.Tier != c.wantTier || p.GraduationReady != c.wantReadyDefault {
				t.Errorf("samples %d tier %s ready %v, want %d %s %v", p.Samples, p.Tier, p.GraduationReady, c.samples, c.wantTier, c.wantReadyDefault)
			}
			if p.ActionClass != "tool.call.local" || p.Threshold != trust.DefaultThreshold {
				t.Errorf("class %q threshold %+v", p.ActionClass, p.Threshold)
			}
		})
	}
	t.Run("the prior's interval is the documented one", func(t *testing.T) {
		p := trust.ComputePosterior("x.y", trust.Tally{}, trust.DefaultThreshold, false)
		if math.Round(p.CILow*1e4)/1e4 != 0.0943 || math.Round(p.CIHigh*1e4)/1e4 != 0.9057 || p.Mean != 0.5 {
			t.Fatalf("Beta(2,2) → [%g, %g] mean %g", p.CILow, p.CIHigh, p.Mean)
		}
	})
}

func TestEvidenceWeight_IsDecisionTimesProvenance(t *testing.T) {
	t.Parallel()
	for label, d := range trust.DecisionWeights {
		for prov, pw := range trust.ProvenanceWeights {
			gotD, gotP, w, err := trust.Evidence{Label: label, Provenance: prov}.Weight()
			if err != nil || gotD != d || gotP != pw || w != d*pw {
				t.Errorf("%s/%s: %g %g %g %v", label, prov, gotD, gotP, w, err)
			}
		}
	}
	if _, _, w, _ := (trust.Evidence{Label: trust.LabelApproved, Provenance: trust.ProvenanceModelInferred}).Weight(); math.Abs(w-0.085) > 1e-15 {
		t.Errorf("a model-inferred approval weighs %g, want 0.1 × 0.85", w)
	}
	if _, _, w, _ := (trust.Evidence{Label: trust.LabelRejected, Provenance: trust.ProvenanceConnector}).Weight(); math.Abs(w+0.3) > 1e-15 {
		t.Errorf("a connector's rejection weighs %g, want 0.3 × −1", w)
	}
	for _, bad := range []trust.Evidence{{Label: "liked", Provenance: trust.ProvenancePrincipal}, {Label: trust.LabelApproved, Provenance: "rumour"}} {
		if _, _, _, err := bad.Weight(); err == nil {
			t.Errorf("%+v weighed without an error", bad)
		}
	}
}

func TestTally_ZeroWeightsAreNoEvidence(t *testing.T) {
	t.Parallel()
	got := trust.TallyOf([]float64{0, 0.5, 0, -0.25, 0, -0})
	if got != (trust.Tally{Positive: 0.5, Negative: 0.25, Samples: 2}) {
		t.Fatalf("tally %+v", got)
	}
	if p := trust.ComputePosterior("x.y", trust.TallyOf([]float64{0, 0, 0}), trust.DefaultThreshold, false); p.Tier != trust.TierNew || p.Alpha != 2 || p.Beta != 2 {
		t.Fatalf("only held evidence: %+v", p)
	}
}

func TestThresholdFor_ClassDefaultsAndTheWorkspaceOverride(t *testing.T) {
	t.Parallel()
	override := trust.Threshold{CILow: 0.5, MinSamples: 3}
	cases := []struct {
		class    string
		override *trust.Threshold
		want     trust.Threshold
	}{
		{"tool.call.local", nil, trust.Threshold{CILow: 0.80, MinSamples: 10}},
		{"draft.compose", nil, trust.Threshold{CILow: 0.80, MinSamples: 10}},
		{"email.send.external", nil, trust.Threshold{CILow: 0.92, MinSamples: 30}},
		{"calendar.create", nil, trust.Threshold{CILow: 0.88, MinSamples: 20}},
		{"email.send.external", &override, override},
		{"local.unknown", &override, override},
	}
	for _, c := range cases {
		if got := trust.ThresholdFor(c.class, c.override); got != c.want {
			t.Errorf("%s (override %v): %+v, want %+v", c.class, c.override != nil, got, c.want)
		}
	}
	for _, th := range []trust.Threshold{{0, 1}, {1, 1}, {0.5, 0}, {0.5, 100001}, {math.NaN(), 5}} {
		if th.Valid() {
			t.Errorf("%+v is valid", th)
		}
	}
	for _, th := range []trust.Threshold{{0.0001, 1}, {0.9999, 100000}, trust.DefaultThreshold} {
		if !th.Valid() {
			t.Errorf("%+v is not valid", th)
		}
	}
}

func TestPosterior_TiersAtTheirBoundaries(t *testing.T) {
	t.Parallel()
	ten := trust.TallyOf(weights(t, trust.ProvenancePrincipal, repeat(trust.LabelApproved, 10)...))
	low := trust.ComputePosterior("c.x", ten, trust.DefaultThreshold, false).CILow // ≈ 0.6017
	cases := []struct {
		name      string
		tally     trust.Tally
		th        trust.Threshold
		suspended bool
		tier      trust.Tier
		ready     bool
	}{
		{"no evidence is new", trust.Tally{}, trust.DefaultThreshold, false, trust.TierNew, false},
		{"no evidence and a violation is suspended", trust.Tally{}, trust.DefaultThreshold, true, trust.TierSuspended, false},
		{"ci_low exactly at the threshold is ready", ten, trust.Threshold{CILow: low, MinSamples: 10}, false, trust.TierReady, true},
		{"ci_low just under the threshold is learning", ten, trust.Threshold{CILow: math.Nextafter(low, 1), MinSamples: 10}, false, trust.TierLearning, false},
		{"samples exactly at the minimum are ready", ten, trust.Threshold{CILow: 0.6, MinSamples: 10}, false, trust.TierReady, true},
		{"one sample short is learning", ten, trust.Threshold{CILow: 0.6, MinSamples: 11}, false, trust.TierLearning, false},
		// Ready by the numbers, and still suspended: graduation_ready is
		// reported, the tier is what holds.
		{"ready with an open violation is suspended", ten, trust.Threshold{CILow: 0.6, MinSamples: 10}, true, trust.TierSuspended, true},
		{"one sample of one", trust.Tally{Positive: 1, Samples: 1}, trust.Threshold{CILow: 0.01, MinSamples: 1}, false, trust.TierReady, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := trust.ComputePosterior("c.x", c.tally, c.th, c.suspended)
			if p.Tier != c.tier || p.GraduationReady != c.ready {
				t.Fatalf("tier %s ready %v (ci_low %.17g, samples %d, threshold %+v); want %s %v", p.Tier, p.GraduationReady, p.CILow, p.Samples, c.th, c.tier, c.ready)
			}
		})
	}
}

func TestPosterior_DensityIntegratesToOne(t *testing.T) {
	t.Parallel()
	for _, tally := range []trust.Tally{{}, {Positive: 8.5, Samples: 10}, {Negative: 40, Samples: 40}, {Positive: 300, Negative: 2, Samples: 320}} {
		p := trust.ComputePosterior("c.x", tally, trust.DefaultThreshold, false)
		pts := p.Density(2000)
		if len(pts) != 2001 || pts[0].X != 0 || pts[2000].X != 1 {
			t.Fatalf("points %d from %g to %g", len(pts), pts[0].X, pts[len(pts)-1].X)
		}
		area := 0.0
		for i := 1; i < len(pts); i++ {
			area += (pts[i].X - pts[i-1].X) * (pts[i].Y + pts[i-1].Y) / 2
		}
		if math.Abs(area-1) > 1e-3 {
			t.Errorf("Beta(%g, %g): the density integrates to %g", p.Alpha, p.Beta, area)
		}
		if got, want := p.DensityAt(p.Mean), pts[int(math.Round(p.Mean*2000))].Y; math.Abs(got-want)/want > 0.05 {
			t.Errorf("density at the mean %g, near it %g", got, want)
		}
	}
}

func BenchmarkPosterior(b *testing.B) {
	tally := trust.Tally{Positive: 25.5, Negative: 1.7, Samples: 34}
	th := trust.ThresholdFor("email.send.external", nil)
	for b.Loop() {
		_ = trust.ComputePosterior("email.send.external", tally, th, false)
	}
}

func BenchmarkPosteriorDensity(b *testing.B) {
	p := trust.ComputePosterior("email.send.external", trust.Tally{Positive: 25.5, Negative: 1.7, Samples: 34}, trust.DefaultThreshold, false)
	for b.Loop() {
		_ = p.Density(100)
	}
}
