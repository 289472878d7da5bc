package policy

import "fmt"

// Tier is a tool's effect as the notebook scope names it: the same axis.
type Tier string

// Tiers, least to most dangerous.
const (
	TierSafe        Tier = "safe"
	TierMutating    Tier = "mutating"
	TierDestructive Tier = "destructive"
)

// Tiers lists every tier.
var Tiers = []Tier{TierSafe, TierMutating, TierDestructive}

// TierOf is the tier of an effect; an unknown effect has no tier (""),
// which GateAction refuses.
func TierOf(e Effect) Tier {
	switch e {
	case EffectRead:
		return TierSafe
	case EffectMutate:
		return TierMutating
	case EffectDestructive:
		return TierDestructive
	}
	return ""
}

// TrustLevel is a notebook's durable setting.
type TrustLevel string

// Trust levels; cautious is the default.
const (
	TrustCautious   TrustLevel = "cautious"
	TrustTrusted    TrustLevel = "trusted"
	TrustAutonomous TrustLevel = "autonomous"
)

// TrustLevels lists every valid level, least to most trusting.
var TrustLevels = []TrustLevel{TrustCautious, TrustTrusted, TrustAutonomous}

// Valid reports whether t is a known level (exactly: "Trusted" is not).
func (t TrustLevel) Valid() bool {
	return t == TrustCautious || t == TrustTrusted || t == TrustAutonomous
}

// Explain says in a sentence what the level lets run.
func (t TrustLevel) Explain() string {
	switch t {
	case TrustCautious:
		return "Mutating and destructive tools ask before they run."
	case TrustTrusted:
		return "Mutating tools run; destructive tools ask."
	case TrustAutonomous:
		return "Every tool runs without asking you, destructive ones too."
	}
	return ""
}

// Gate is how a proposed cell in a notebook reaches effect.
type Gate string

// Gates.
const (
	GateAuto    Gate = "auto"    // runs at once
	GateConfirm Gate = "confirm" // a "Run this?" card for the owner
	// GateGated is reserved; everywhere it is handled like GateConfirm.
	GateGated Gate = "gated"
)

// NeedsHuman reports whether a cell with this gate waits for its owner.
// Anything but auto does: the reserved gated and unknown values too.
func (g Gate) NeedsHuman() bool { return g != GateAuto }

// GateAction is the notebook scope gate, exactly this matrix:
//
//	tier \ trust   cautious  trusted  autonomous
//	safe           auto      auto     auto
//	mutating       confirm   auto     auto
//	destructive    confirm   confirm  auto
//
// An unknown tier or trust level (names match exactly, so "Safe" is
// unknown) is an error, returned with GateConfirm, the strictest outcome, so
// a caller that ignores the error still fails closed.
func GateAction(tier Tier, trust TrustLevel) (Gate, error) {
	if !trust.Valid() {
		return GateConfirm, fmt.Errorf("policy: unknown trust level %q", trust)
	}
	switch tier {
	case TierSafe:
		return GateAuto, nil
	case TierMutating:
		if trust == TrustCautious {
			return GateConfirm, nil
		}
		return GateAuto, nil
	case TierDestructive:
		if trust == TrustAutonomous {
			return GateAuto, nil
		}
		return GateConfirm, nil
	}
	return GateConfirm, fmt.Errorf("policy: unknown tier %q", tier)
}
