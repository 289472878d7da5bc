package trust

// This file is pure: the standard library and gonum only, no I/O.

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// The prior every class starts from: Beta(2, 2), centred on one half and
// wide enough that a handful of judgments moves it.
const (
	PriorAlpha = 2.0
	PriorBeta  = 2.0
)

// The credible interval is the equal-tailed 95 % interval: the 2.5 % and
// 97.5 % quantiles of the posterior.
const (
	IntervalLow  = 0.025
	IntervalHigh = 0.975
)

// Tier is where a class stands on the way to graduation.
type Tier string

// Tiers, as the posterior reports them.
const (
	// TierNew is a class with no evidence yet.
	TierNew Tier = "new"
	// TierLearning has evidence but is not (yet) past its threshold.
	TierLearning Tier = "learning"
	// TierReady is past its threshold: graduation is recommended.
	TierReady Tier = "ready"
	// TierSuspended has an open violation: whatever the numbers say, every
	// call of the class waits for review until the principal clears it.
	TierSuspended Tier = "suspended"
)

// Threshold is what a class must reach to be graduation-ready: the lower
// end of its credible interval at least CILow, from at least MinSamples
// pieces of evidence.
type Threshold struct {
	CILow      float64
	MinSamples int
}

// Valid reports whether th can be a threshold: CILow strictly between 0
// and 1, MinSamples from 1 to 100000 (the database's bounds).
func (th Threshold) Valid() bool {
	return th.CILow > 0 && th.CILow < 1 && th.MinSamples >= 1 && th.MinSamples <= 100000
}

// DefaultThreshold is the threshold for any class without one of its own.
var DefaultThreshold = Threshold{CILow: 0.80, MinSamples: 10}

// classThresholds are the per-class defaults: the further a class reaches,
// the more evidence it needs.
func classThresholds() map[string]Threshold {
	return map[string]Threshold{
		"draft.compose":       {CILow: 0.80, MinSamples: 10},
		"email.send.external": {CILow: 0.92, MinSamples: 30},
		"calendar.create":     {CILow: 0.88, MinSamples: 20},
	}
}

// ThresholdFor is the threshold in force for class: the workspace's
// override when it has one, else the class's default, else
// DefaultThreshold.
func ThresholdFor(class string, override *Threshold) Threshold {
	if override != nil {
		return *override
	}
	if th, ok := classThresholds()[class]; ok {
		return th
	}
	return DefaultThreshold
}

// Tally sums a class's evidence: positive weights, the magnitude of
// negative ones, and how many weights were not zero.
type Tally struct {
	Positive float64
	Negative float64
	Samples  int
}

// Add counts one weight: a positive weight adds to Positive, a negative
// one's magnitude to Negative; a zero weight (held) is no evidence and is
// not counted.
func (t Tally) Add(w float64) Tally {
	switch {
	case w > 0:
		t.Positive += w
		t.Samples++
	case w < 0:
		t.Negative -= w
		t.Samples++
	}
	return t
}

// TallyOf sums weights (see Tally.Add).
func TallyOf(weights []float64) Tally {
	var t Tally
	for _, w := range weights {
		t = t.Add(w)
	}
	return t
}

// Posterior is what the evidence says about a class: Beta(Alpha, Beta),
// its mean and 95 % credible interval, and whether that clears the
// class's threshold.
//
// It recommends; it never unlocks. GraduationReady is reported for every
// class, external-effect ones included, but nothing in Gatehouse loosens
// a decision because of it: a person reads it and decides.
type Posterior struct {
	ActionClass string
	Alpha, Beta float64
	Mean        float64
	CILow       float64
	CIHigh      float64
	CIWidth     float64
	// Samples is how many pieces of evidence had a non-zero weight.
	Samples int
	Tier    Tier
	// GraduationReady: CILow ≥ Threshold.CILow and Samples ≥
	// Threshold.MinSamples (a recommendation only).
	GraduationReady bool
	Threshold       Threshold
}

// ComputePosterior updates the Beta(2, 2) prior with t and judges it
// against th. suspended says the class has an open violation, which makes
// its tier suspended whatever the numbers.
func ComputePosterior(class string, t Tally, th Threshold, suspended bool) Posterior {
	a, b := PriorAlpha+t.Positive, PriorBeta+t.Negative
	d := distuv.Beta{Alpha: a, Beta: b}
	lo, hi := d.Quantile(IntervalLow), d.Quantile(IntervalHigh)
	p := Posterior{
		ActionClass: class, Alpha: a, Beta: b, Mean: a / (a + b),
		CILow: lo, CIHigh: hi, CIWidth: hi - lo, Samples: t.Samples, Threshold: th,
	}
	p.GraduationReady = p.Samples >= th.MinSamples && p.CILow >= th.CILow
	switch {
	case suspended:
		p.Tier = TierSuspended
	case p.Samples == 0:
		p.Tier = TierNew
	case p.GraduationReady:
		p.Tier = TierReady
	default:
		p.Tier = TierLearning
	}
	return p
}

// DensityPoint is the posterior density at X.
type DensityPoint struct{ X, Y float64 }

// Density samples the posterior's density at n+1 evenly spaced points
// from 0 to 1 (n at least 1), for drawing it. A density that is not finite
// (at an end, for a shape below 1) is drawn as 0.
func (p Posterior) Density(n int) []DensityPoint {
	n = max(n, 1)
	d := distuv.Beta{Alpha: p.Alpha, Beta: p.Beta}
	out := make([]DensityPoint, n+1)
	for i := range out {
		x := float64(i) / float64(n)
		out[i] = DensityPoint{X: x, Y: finite(d.Prob(x))}
	}
	return out
}

// DensityAt is the posterior's density at x (0 where it is not finite).
func (p Posterior) DensityAt(x float64) float64 {
	return finite(distuv.Beta{Alpha: p.Alpha, Beta: p.Beta}.Prob(x))
}

func finite(y float64) float64 {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return 0
	}
	return y
}
