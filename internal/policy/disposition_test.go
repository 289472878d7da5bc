package policy

import "testing"

func TestDecideToolDisposition_EveryEffectAndMode(t *testing.T) {
	cases := []struct {
		effect Effect
		mode   PermissionMode
		want   Disposition
	}{
		{EffectRead, ModeApprove, AutoRun},
		{EffectRead, ModeAuto, AutoRun},
		{EffectMutate, ModeApprove, Propose},
		{EffectMutate, ModeAuto, AutoApply},
		{EffectDestructive, ModeApprove, Propose},
		{EffectDestructive, ModeAuto, Propose},
		// Unknown and empty modes fail closed.
		{EffectRead, "", AutoRun},
		{EffectMutate, "", Propose},
		{EffectMutate, "AUTO", Propose},
		{EffectMutate, "Auto", Propose},
		{EffectMutate, " auto", Propose},
		{EffectMutate, "autonomous", Propose},
		{EffectMutate, "yolo", Propose},
		{EffectDestructive, "", Propose},
		{EffectDestructive, "autonomous", Propose},
		// Unknown effects fail closed too.
		{"", ModeAuto, Propose},
		{"write", ModeAuto, Propose},
		{"READ", ModeAuto, Propose},
	}
	for _, c := range cases {
		t.Run(string(c.effect)+"/"+string(c.mode), func(t *testing.T) {
			if got := DecideToolDisposition(c.effect, c.mode); got != c.want {
				t.Fatalf("DecideToolDisposition(%q, %q) = %q, want %q", c.effect, c.mode, got, c.want)
			}
		})
	}
}

// TestDecideToolDisposition_DestructiveNeverAutoApplies is the security
// invariant: no mode value, known or not, routes a destructive call to
// auto-apply, and auto-apply is reachable only through (mutate, auto).
func TestDecideToolDisposition_DestructiveNeverAutoApplies(t *testing.T) {
	modes := append([]PermissionMode{"", "AUTO", "auto ", "autonomous", "trusted", "\x00", "approve"}, PermissionModes...)
	effects := append([]Effect{"", "write", "Destructive", "delete"}, Effects...)
	for _, m := range modes {
		if got := DecideToolDisposition(EffectDestructive, m); got != Propose {
			t.Errorf("destructive in mode %q → %q", m, got)
		}
		for _, e := range effects {
			got := DecideToolDisposition(e, m)
			if got == AutoApply && (e != EffectMutate || m != ModeAuto) {
				t.Errorf("auto-apply reached through (%q, %q)", e, m)
			}
			if got == AutoRun && e != EffectRead {
				t.Errorf("auto-run reached through (%q, %q)", e, m)
			}
		}
	}
}
