package proposals

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// ShadowVerdict is what a tool's shadow rule (the policy file's mode:
// shadow) would have decided on a live call, where that differs from the
// decision enforced: kept in the call's audit row (data.shadow), so the
// rule's evidence costs no statement more on the call path.
type ShadowVerdict struct {
	// Rule identifies the rule (tools.Tool.ShadowRule).
	Rule string `json:"rule"`
	// State is what the rule would have decided.
	State policy.State `json:"state"`
	// Kind is how that differs from the decision enforced, in the policy
	// replay's words: newly-asks (would now ask a person), newly-allowed
	// (would no longer ask), newly-blocked (would block) or restated.
	Kind replay.Kind `json:"kind"`
}

// shadowVerdict decides the call again under the tool's shadow rule, with
// the same decision (decideOn) on the same rows, arguments and caller,
// and says what it would have decided when that is not enforced: nil when
// the tool has no shadow rule or the rule decides the same. The rule is
// the tool's own, from the same registry snapshot, so a reload never pairs
// a decision with another file's rule.
func (s *Service) shadowVerdict(rc decisionRows, p auth.Principal, scope Scope, tool *tools.Tool, args json.RawMessage, enforced policy.State) *ShadowVerdict {
	if tool.Shadow == nil {
		return nil
	}
	d, err := s.decideOn(rc, p, scope, tool.Shadow, args)
	if err != nil || d.State == enforced {
		return nil // its arguments decoded for the enforced decision: it cannot fail here
	}
	return &ShadowVerdict{Rule: tool.ShadowRule, State: d.State, Kind: replay.KindOf(enforced, d.State)}
}
