package policy

import "testing"

// The pure decision is on every call's path twice (at propose time and at
// the moment of effect); `make bench` reports these beside the HTTP
// phases. Target: a decision in 2 µs or less.

// BenchmarkDecide_AutoApply is a typical call: a change in a conversation
// in auto mode, medium risk, an internal class, no constraints.
func BenchmarkDecide_AutoApply(b *testing.B) {
	classes := DefaultClasses()
	c := Call{Scope: ScopeConversation, Effect: EffectMutate, Mode: ModeAuto, Risk: RiskMedium, ActionClass: "tool.call.local"}
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(c, classes); d.State != StateAllowed {
			b.Fatalf("state = %s", d.State)
		}
	}
}

// BenchmarkDecide_WithConstraints is a webhook under the workspace's
// allowlist: allowed_with_constraints, the constraints copied out.
func BenchmarkDecide_WithConstraints(b *testing.B) {
	classes, err := NewClassRegistry(map[string]ClassGroup{"webhook.post": GroupExternal})
	if err != nil {
		b.Fatal(err)
	}
	c := Call{Scope: ScopeConversation, Effect: EffectMutate, Mode: ModeAuto, Risk: RiskMedium, ActionClass: "webhook.post",
		Constraints: []string{ConstraintDomainAllowlist}}
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(c, classes); d.State != StateAllowedWithConstraints {
			b.Fatalf("state = %s", d.State)
		}
	}
}

// BenchmarkCheck_DomainAllowlist checks a webhook's URL against an
// allowlist of three domains, as the executor does at effect.
func BenchmarkCheck_DomainAllowlist(b *testing.B) {
	cs := []Constraint{{Kind: ConstraintDomainAllowlist, Values: []string{"hooks.example.com", "example.org", "internal.example"}}}
	f := Facts{URLs: []string{"https://hooks.example.com/gatehouse/42"}}
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(cs, f); err != nil {
			b.Fatal(err)
		}
	}
}
