package policy

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestRank_EveryStateAndUnknown(t *testing.T) {
	cases := []struct {
		state State
		want  int
	}{
		{StateAllowed, 0},
		{StateAllowedWithConstraints, 1},
		{StateReviewRequired, 2},
		{StateDeferred, 3},
		{StateHumanOnly, 4},
		{StateBlocked, 5},
		// Unknown states rank as blocked: they can only tighten.
		{"", 5},
		{"Allowed", 5},
		{"allowed ", 5},
		{"approved", 5},
	}
	for _, c := range cases {
		t.Run(string(c.state), func(t *testing.T) {
			if got := c.state.Rank(); got != c.want {
				t.Errorf("%q.Rank() = %d, want %d", c.state, got, c.want)
			}
		})
	}
	for i, s := range States {
		if s.Rank() != i {
			t.Errorf("States[%d] = %q ranks %d", i, s, s.Rank())
		}
	}
}

func TestStrictest(t *testing.T) {
	cases := []struct {
		name   string
		states []State
		want   State
	}{
		{"none is allowed", nil, StateAllowed},
		{"one", []State{StateDeferred}, StateDeferred},
		{"allowed and constraints", []State{StateAllowed, StateAllowedWithConstraints}, StateAllowedWithConstraints},
		{"order does not matter", []State{StateHumanOnly, StateAllowed, StateReviewRequired}, StateHumanOnly},
		{"review beats constraints", []State{StateAllowedWithConstraints, StateReviewRequired}, StateReviewRequired},
		{"blocked wins", []State{StateBlocked, StateHumanOnly}, StateBlocked},
		{"unknown is blocked", []State{StateAllowed, "maybe"}, StateBlocked},
		{"empty string is blocked", []State{""}, StateBlocked},
		{"case variant is blocked", []State{"ALLOWED"}, StateBlocked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Strictest(c.states...); got != c.want {
				t.Errorf("Strictest(%q) = %q, want %q", c.states, got, c.want)
			}
		})
	}
}

func TestAuthorityAndRisk_Valid(t *testing.T) {
	for _, a := range []Authority{AuthorityRead, AuthorityWriteIdempotent, AuthorityWriteNonIdempotent, AuthorityIrreversible} {
		if !a.Valid() {
			t.Errorf("%q not valid", a)
		}
	}
	for _, a := range []Authority{"", "Read", "write", "write_idempotent"} {
		if a.Valid() {
			t.Errorf("%q valid", a)
		}
	}
	for _, r := range []Risk{RiskLow, RiskMedium, RiskHigh} {
		if !r.Valid() {
			t.Errorf("%q not valid", r)
		}
	}
	for _, r := range []Risk{"", "High", "critical", " low"} {
		if r.Valid() {
			t.Errorf("%q valid", r)
		}
	}
}

func TestDefaultRisk(t *testing.T) {
	cases := []struct {
		effect Effect
		want   Risk
	}{
		{EffectRead, RiskLow},
		{EffectMutate, RiskMedium},
		{EffectDestructive, RiskHigh},
		{"", RiskHigh},
		{"READ", RiskHigh},
		{"write", RiskHigh},
	}
	for _, c := range cases {
		if got := DefaultRisk(c.effect); got != c.want {
			t.Errorf("DefaultRisk(%q) = %q, want %q", c.effect, got, c.want)
		}
	}
}

func TestScopeLayer(t *testing.T) {
	conv := func(e Effect, m PermissionMode) Call { return Call{Scope: ScopeConversation, Effect: e, Mode: m} }
	nb := func(e Effect, tr TrustLevel) Call { return Call{Scope: ScopeNotebook, Effect: e, Trust: tr} }
	cases := []struct {
		name       string
		call       Call
		want       State
		wantReason string
	}{
		{"conversation read approve", conv(EffectRead, ModeApprove), StateAllowed, "Reads run at once"},
		{"conversation read auto", conv(EffectRead, ModeAuto), StateAllowed, "Reads run at once"},
		{"conversation mutate approve", conv(EffectMutate, ModeApprove), StateReviewRequired, "approve mode"},
		{"conversation mutate auto", conv(EffectMutate, ModeAuto), StateAllowed, "auto mode"},
		{"conversation destructive approve", conv(EffectDestructive, ModeApprove), StateReviewRequired, "Destructive calls always need a person"},
		{"conversation destructive auto", conv(EffectDestructive, ModeAuto), StateReviewRequired, "Destructive calls always need a person"},
		{"conversation mutate Auto", conv(EffectMutate, "Auto"), StateReviewRequired, "not known"},
		{"conversation mutate empty mode", conv(EffectMutate, ""), StateReviewRequired, "not known"},
		{"conversation unknown effect", conv("write", ModeAuto), StateReviewRequired, `Effect "write" is not known`},
		{"notebook safe cautious", nb(EffectRead, TrustCautious), StateAllowed, "runs at once"},
		{"notebook mutating cautious", nb(EffectMutate, TrustCautious), StateReviewRequired, "cautious, so a mutating cell waits"},
		{"notebook mutating trusted", nb(EffectMutate, TrustTrusted), StateAllowed, "trusted, so a mutating cell runs"},
		{"notebook destructive trusted", nb(EffectDestructive, TrustTrusted), StateReviewRequired, "waits"},
		{"notebook destructive autonomous", nb(EffectDestructive, TrustAutonomous), StateAllowed, "runs at once"},
		{"notebook unknown trust", nb(EffectRead, "Trusted"), StateReviewRequired, `Trust level "Trusted" is not known`},
		{"notebook unknown effect", nb("delete", TrustAutonomous), StateReviewRequired, `Effect "delete" is not known`},
		{"unknown scope", Call{Scope: "chat", Effect: EffectRead, Mode: ModeAuto}, StateBlocked, `Scope "chat" is not known`},
		{"empty scope", Call{Effect: EffectRead}, StateBlocked, "not known"},
		{"scope case variant", Call{Scope: "Conversation", Effect: EffectRead}, StateBlocked, "not known"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := ScopeLayer(c.call)
			if v.Layer != LayerScope || v.State != c.want || !strings.Contains(v.Reason, c.wantReason) {
				t.Errorf("ScopeLayer = %+v, want state %q, reason containing %q", v, c.want, c.wantReason)
			}
		})
	}
}

func TestContractLayer(t *testing.T) {
	cases := []struct {
		name       string
		call       Call
		want       State
		wantReason string
	}{
		{"no gating", Call{}, StateAllowed, "does not require a human"},
		{"human gated", Call{HumanGated: true, ApproverRole: "finance"}, StateDeferred, "approval by the finance role"},
		{"threshold exceeded", Call{ThresholdExceeded: true, ApproverRole: "finance"}, StateDeferred, "threshold"},
		{"both", Call{HumanGated: true, ThresholdExceeded: true}, StateDeferred, "an approver"},
		{"no role", Call{HumanGated: true}, StateDeferred, "approval by an approver"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := ContractLayer(c.call)
			if v.Layer != LayerContract || v.State != c.want || !strings.Contains(v.Reason, c.wantReason) {
				t.Errorf("ContractLayer = %+v, want state %q, reason containing %q", v, c.want, c.wantReason)
			}
		})
	}
}

func TestRiskLayer(t *testing.T) {
	cases := []struct {
		risk Risk
		auto bool
		want State
	}{
		{RiskLow, false, StateAllowed},
		{RiskLow, true, StateAllowed},
		{RiskMedium, false, StateAllowed},
		{RiskMedium, true, StateAllowed},
		{RiskHigh, false, StateDeferred},
		{RiskHigh, true, StateAllowed},
		// Unknown risks fail closed, even when high risk is auto-approved.
		{"", false, StateDeferred},
		{"", true, StateDeferred},
		{"HIGH", true, StateDeferred},
		{"critical", true, StateDeferred},
	}
	for _, c := range cases {
		t.Run(string(c.risk), func(t *testing.T) {
			v := RiskLayer(Call{Risk: c.risk, AutoApproveHighRisk: c.auto})
			if v.Layer != LayerRisk || v.State != c.want || v.Reason == "" {
				t.Errorf("RiskLayer(%q, auto=%v) = %+v, want %q", c.risk, c.auto, v, c.want)
			}
		})
	}
}

func TestClassLayer(t *testing.T) {
	reg := DefaultClasses()
	cases := []struct {
		name      string
		class     string
		violation bool
		reg       *ClassRegistry
		want      State
	}{
		{"internal", "read.context", false, reg, StateAllowed},
		{"external", "email.send.external", false, reg, StateAllowed},
		{"human only", "payment.initiate", false, reg, StateHumanOnly},
		{"human only beats a violation", "payment.initiate", true, reg, StateHumanOnly},
		{"human only through an alias", "payment.spend", false, reg, StateHumanOnly},
		{"open violation", "email.send.external", true, reg, StateReviewRequired},
		{"unclassified", "", false, reg, StateBlocked},
		{"unknown class", "unknown.class", false, reg, StateBlocked},
		{"invalid class", "email", false, reg, StateBlocked},
		{"nil registry", "read.context", false, nil, StateBlocked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := ClassLayer(Call{ActionClass: c.class, OpenViolation: c.violation}, c.reg)
			if v.Layer != LayerClass || v.State != c.want || v.Reason == "" {
				t.Errorf("ClassLayer(%q) = %+v, want %q", c.class, v, c.want)
			}
		})
	}
}

func TestConstraintLayer(t *testing.T) {
	if v := ConstraintLayer(Call{}); v.State != StateAllowed || v.Layer != LayerConstraints || v.Reason == "" {
		t.Errorf("no constraints: %+v", v)
	}
	v := ConstraintLayer(Call{Constraints: []string{"max_amount", "internal_only"}})
	if v.State != StateAllowedWithConstraints || !strings.Contains(v.Reason, "max_amount, internal_only") {
		t.Errorf("constraints: %+v", v)
	}
}

func TestDecide_Examples(t *testing.T) {
	reg := DefaultClasses()
	base := Call{Scope: ScopeConversation, Effect: EffectMutate, Mode: ModeAuto, Risk: RiskMedium, ActionClass: "draft.compose"}
	with := func(f func(*Call)) Call { c := base; f(&c); return c }
	cases := []struct {
		name        string
		call        Call
		state       State
		disposition string
	}{
		{"auto-apply", base, StateAllowed, "auto-apply"},
		{"auto-apply with constraints", with(func(c *Call) { c.Constraints = []string{"rate_limit"} }), StateAllowedWithConstraints, "auto-apply"},
		{"read auto-runs", with(func(c *Call) { c.Effect, c.Risk = EffectRead, RiskLow }), StateAllowed, "auto-run"},
		{"approve mode proposes", with(func(c *Call) { c.Mode = ModeApprove }), StateReviewRequired, "propose"},
		{"constraints do not bypass review", with(func(c *Call) { c.Mode, c.Constraints = ModeApprove, []string{"dry_run_only"} }), StateReviewRequired, "propose"},
		{"destructive proposes", with(func(c *Call) { c.Effect, c.AutoApproveHighRisk, c.Risk = EffectDestructive, true, RiskHigh }), StateReviewRequired, "propose"},
		{"destructive high risk defers", with(func(c *Call) { c.Effect, c.Risk = EffectDestructive, RiskHigh }), StateDeferred, "defer"},
		{"human gated defers", with(func(c *Call) { c.HumanGated = true }), StateDeferred, "defer"},
		{"human only", with(func(c *Call) { c.ActionClass = "payment.initiate" }), StateHumanOnly, "human_only"},
		{"unclassified is blocked", with(func(c *Call) { c.ActionClass = "" }), StateBlocked, "blocked"},
		{"notebook auto", with(func(c *Call) { c.Scope, c.Trust = ScopeNotebook, TrustTrusted }), StateAllowed, "auto"},
		{"notebook confirm", with(func(c *Call) { c.Scope, c.Trust = ScopeNotebook, TrustCautious }), StateReviewRequired, "confirm"},
		{"unknown scope", with(func(c *Call) { c.Scope = "chat" }), StateBlocked, "blocked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.call, reg)
			if d.State != c.state || d.Disposition != c.disposition {
				t.Errorf("Decide = %q/%q, want %q/%q; layers %+v", d.State, d.Disposition, c.state, c.disposition, d.Layers)
			}
			if !slices.Equal(d.Constraints, c.call.Constraints) {
				t.Errorf("constraints = %q, want %q", d.Constraints, c.call.Constraints)
			}
		})
	}
}

// randomCall draws a call from every known value and plenty of unknown
// ones, so the properties below cover what a buggy caller could send.
func randomCall(r *rand.Rand, classes []string) Call {
	pick := func(n int) int { return r.IntN(n) }
	scopes := []ScopeKind{ScopeConversation, ScopeNotebook, "", "Conversation", "chat"}
	effects := append([]Effect{"", "write", "READ", "Destructive"}, Effects...)
	modes := append([]PermissionMode{"", "AUTO", "Auto", " auto", "autonomous"}, PermissionModes...)
	trusts := append([]TrustLevel{"", "Trusted", "AUTONOMOUS", "yolo", "auto"}, TrustLevels...)
	risks := []Risk{RiskLow, RiskMedium, RiskHigh, "", "HIGH", "critical"}
	classes = append(slices.Clone(classes), "", "unknown.class", "payment.spend", " Email.Send.External ", "email")
	constraints := [][]string{nil, {}, {ConstraintMaxAmount}, {ConstraintInternalOnly, ConstraintRateLimit}}
	tools := []string{"", "records.get", "records.put", "Records.Get"}
	tokenScopes := []*TokenScope{nil, nil, {}, {ReadOnly: true}, {Tools: []string{}}, {Tools: []string{"records.get"}},
		{Tools: []string{"records.get", "records.put"}, ReadOnly: true}}
	return Call{
		Scope:               scopes[pick(len(scopes))],
		Effect:              effects[pick(len(effects))],
		Mode:                modes[pick(len(modes))],
		Trust:               trusts[pick(len(trusts))],
		Risk:                risks[pick(len(risks))],
		ActionClass:         classes[pick(len(classes))],
		HumanGated:          r.IntN(2) == 0,
		ThresholdExceeded:   r.IntN(2) == 0,
		ApproverRole:        []string{"", "finance"}[pick(2)],
		AutoApproveHighRisk: r.IntN(2) == 0,
		OpenViolation:       r.IntN(2) == 0,
		Constraints:         constraints[pick(len(constraints))],
		Tool:                tools[pick(len(tools))],
		TokenScope:          tokenScopes[pick(len(tokenScopes))],
	}
}

// TestDecide_LayersOnlyTighten is the property the design promises: the
// final state is the strictest layer's, so no layer can loosen another, and
// the conversation security invariant holds whatever else is set.
func TestDecide_LayersOnlyTighten(t *testing.T) {
	reg, err := NewClassRegistry(map[string]ClassGroup{"crm.note.add": GroupInternal, "bank.wire.send": GroupHumanOnly})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	wantLayers := []string{LayerScope, LayerContract, LayerRisk, LayerClass, LayerConstraints, LayerToken}
	seen := map[State]int{}
	for i := range 20000 {
		c := randomCall(r, reg.Classes())
		d := Decide(c, reg)
		seen[d.State]++
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("call %d %+v → %+v: "+format, append([]any{i, c, d}, args...)...)
		}
		if len(d.Layers) != len(wantLayers) {
			fail("%d layers", len(d.Layers))
		}
		maxRank := 0
		for j, v := range d.Layers {
			if v.Layer != wantLayers[j] || v.Reason == "" {
				fail("layer %d is %+v", j, v)
			}
			if v.State.Rank() > d.State.Rank() {
				fail("layer %s is stricter (%s) than the decision", v.Layer, v.State)
			}
			maxRank = max(maxRank, v.State.Rank())
		}
		if d.State.Rank() != maxRank || d.State != States[maxRank] {
			fail("state ranks %d, strictest layer ranks %d", d.State.Rank(), maxRank)
		}
		if d.State.Rank() <= StateAllowedWithConstraints.Rank() && slices.ContainsFunc(d.Layers, func(v Verdict) bool {
			return v.State.Rank() > StateAllowedWithConstraints.Rank()
		}) {
			fail("allowed although a layer is stricter")
		}
		if c.Scope == ScopeConversation && c.Effect == EffectDestructive {
			if d.State.Rank() < StateReviewRequired.Rank() || d.Disposition == string(AutoApply) {
				fail("a destructive conversation call got through")
			}
		}
		if d.Disposition == string(AutoApply) && (c.Scope != ScopeConversation || c.Effect != EffectMutate || c.Mode != ModeAuto) {
			fail("auto-apply outside (conversation, mutate, auto)")
		}
		if c.Scope == ScopeConversation && d.State.Rank() <= StateAllowedWithConstraints.Rank() &&
			d.Disposition != string(AutoRun) && d.Disposition != string(AutoApply) {
			fail("allowed conversation call with disposition %q", d.Disposition)
		}
		// A call outside its token's scope is blocked, whatever else is set.
		if ts := c.TokenScope; ts != nil && ((ts.Tools != nil && !slices.Contains(ts.Tools, c.Tool)) || (ts.ReadOnly && c.Effect != EffectRead)) && d.State != StateBlocked {
			fail("a call outside its token's scope got %s", d.State)
		}
		if want := wantDisposition(c, d.State); d.Disposition != want {
			fail("disposition %q, want %q", d.Disposition, want)
		}
		// Tightening any input never loosens the decision.
		tight := c
		tight.HumanGated, tight.OpenViolation, tight.AutoApproveHighRisk = true, true, false
		tight.Constraints = append(slices.Clone(c.Constraints), ConstraintRequiresWitness)
		tight.TokenScope = &TokenScope{Tools: []string{"records.get"}, ReadOnly: true}
		if c.TokenScope != nil {
			tight.TokenScope = &TokenScope{Tools: []string{}, ReadOnly: c.TokenScope.ReadOnly}
		}
		if got := Decide(tight, reg).State; got.Rank() < d.State.Rank() {
			fail("tightened call loosened to %q", got)
		}
	}
	// The draw must reach every state, or the properties prove little.
	for _, s := range States {
		if seen[s] == 0 {
			t.Errorf("no random call was %s", s)
		}
	}
}

func wantDisposition(c Call, s State) string {
	switch {
	case s.Rank() <= StateAllowedWithConstraints.Rank() && c.Scope == ScopeNotebook:
		return "auto"
	case s.Rank() <= StateAllowedWithConstraints.Rank():
		return string(DecideToolDisposition(c.Effect, c.Mode))
	case s == StateReviewRequired && c.Scope == ScopeNotebook:
		return "confirm"
	case s == StateReviewRequired:
		return "propose"
	case s == StateDeferred:
		return "defer"
	case s == StateHumanOnly:
		return "human_only"
	}
	return "blocked"
}

func TestTokenLayer(t *testing.T) {
	cases := []struct {
		name   string
		call   Call
		state  State
		reason string
	}{
		{"no token scope", Call{Tool: "records.put", Effect: EffectMutate}, StateAllowed, "not made with a scoped token"},
		{"empty scope", Call{Tool: "records.put", Effect: EffectMutate, TokenScope: &TokenScope{}}, StateAllowed, "within the token's scope"},
		{"tool in scope", Call{Tool: "records.put", Effect: EffectMutate, TokenScope: &TokenScope{Tools: []string{"records.get", "records.put"}}}, StateAllowed, "within"},
		{"tool outside scope", Call{Tool: "records.put", Effect: EffectRead, TokenScope: &TokenScope{Tools: []string{"records.get"}}}, StateBlocked, `allows only the tools records.get, so a call to "records.put"`},
		{"no tools", Call{Tool: "records.get", Effect: EffectRead, TokenScope: &TokenScope{Tools: []string{}}}, StateBlocked, "allows only no tools"},
		{"tool case variant", Call{Tool: "Records.Get", Effect: EffectRead, TokenScope: &TokenScope{Tools: []string{"records.get"}}}, StateBlocked, "blocked"},
		{"read-only read", Call{Tool: "records.get", Effect: EffectRead, TokenScope: &TokenScope{ReadOnly: true}}, StateAllowed, "within"},
		{"read-only mutate", Call{Tool: "records.put", Effect: EffectMutate, TokenScope: &TokenScope{ReadOnly: true}}, StateBlocked, "read-only, so a mutate call"},
		{"read-only destructive", Call{Effect: EffectDestructive, TokenScope: &TokenScope{ReadOnly: true}}, StateBlocked, "read-only"},
		{"read-only unknown effect", Call{Effect: "READ", TokenScope: &TokenScope{ReadOnly: true}}, StateBlocked, "read-only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := TokenLayer(c.call)
			if v.Layer != LayerToken || v.State != c.state || !strings.Contains(v.Reason, c.reason) {
				t.Errorf("TokenLayer = %+v, want %s with %q", v, c.state, c.reason)
			}
		})
	}
}
