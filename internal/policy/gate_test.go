package policy

import "testing"

func TestGateAction_Matrix(t *testing.T) {
	cases := []struct {
		name    string
		tier    Tier
		trust   TrustLevel
		want    Gate
		wantErr bool
	}{
		{"safe/cautious", TierSafe, TrustCautious, GateAuto, false},
		{"safe/trusted", TierSafe, TrustTrusted, GateAuto, false},
		{"safe/autonomous", TierSafe, TrustAutonomous, GateAuto, false},
		{"mutating/cautious", TierMutating, TrustCautious, GateConfirm, false},
		{"mutating/trusted", TierMutating, TrustTrusted, GateAuto, false},
		{"mutating/autonomous", TierMutating, TrustAutonomous, GateAuto, false},
		{"destructive/cautious", TierDestructive, TrustCautious, GateConfirm, false},
		{"destructive/trusted", TierDestructive, TrustTrusted, GateConfirm, false},
		{"destructive/autonomous", TierDestructive, TrustAutonomous, GateAuto, false},
		// Unknown tiers: an error and the strictest outcome, even at autonomous.
		{"unknown tier", "dangerous", TrustAutonomous, GateConfirm, true},
		{"effect name is not a tier", "read", TrustAutonomous, GateConfirm, true},
		{"empty tier", "", TrustAutonomous, GateConfirm, true},
		{"empty tier, cautious", "", TrustCautious, GateConfirm, true},
		// Unknown trust levels: an error and the strictest outcome, even for safe.
		{"unknown trust", TierSafe, "yolo", GateConfirm, true},
		{"mode name is not a trust level", TierMutating, "auto", GateConfirm, true},
		{"empty trust", TierSafe, "", GateConfirm, true},
		{"empty both", "", "", GateConfirm, true},
		// Case variants and stray spaces are unknown: names match exactly.
		{"tier Safe", "Safe", TrustAutonomous, GateConfirm, true},
		{"tier DESTRUCTIVE", "DESTRUCTIVE", TrustAutonomous, GateConfirm, true},
		{"trust Autonomous", TierDestructive, "Autonomous", GateConfirm, true},
		{"trust TRUSTED", TierMutating, "TRUSTED", GateConfirm, true},
		{"trust with a space", TierMutating, " trusted", GateConfirm, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := GateAction(c.tier, c.trust)
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("GateAction(%q, %q) = %q, %v; want %q, error %v", c.tier, c.trust, got, err, c.want, c.wantErr)
			}
		})
	}
}

// Raising the trust never tightens, and no tier outside the matrix ever
// runs on its own.
func TestGateAction_Invariants(t *testing.T) {
	rank := map[Gate]int{GateAuto: 0, GateConfirm: 1}
	for _, tier := range Tiers {
		for i := 1; i < len(TrustLevels); i++ {
			lo, _ := GateAction(tier, TrustLevels[i-1])
			hi, _ := GateAction(tier, TrustLevels[i])
			if rank[hi] > rank[lo] {
				t.Errorf("%s: %s → %s tightens from %s to %s", tier, TrustLevels[i-1], TrustLevels[i], lo, hi)
			}
		}
	}
	for _, trust := range append(TrustLevels, "", "x") {
		if g, _ := GateAction("x", trust); g == GateAuto {
			t.Errorf("an unknown tier runs on its own at %q", trust)
		}
	}
	for _, g := range []Gate{GateConfirm, GateGated, "", "AUTO"} {
		if !g.NeedsHuman() {
			t.Errorf("gate %q runs without its owner", g)
		}
	}
	if GateAuto.NeedsHuman() {
		t.Error("auto waits for a person")
	}
}

func TestTierOf(t *testing.T) {
	for e, want := range map[Effect]Tier{EffectRead: TierSafe, EffectMutate: TierMutating, EffectDestructive: TierDestructive, "": "", "write": ""} {
		if got := TierOf(e); got != want {
			t.Errorf("TierOf(%q) = %q, want %q", e, got, want)
		}
	}
}
