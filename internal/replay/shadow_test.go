package replay_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// A file is replayed as it would be enforced: its shadow rules (mode:
// shadow) are not.
func TestCandidate_ShadowRulesAreNotReplayedAsEnforced(t *testing.T) {
	t.Parallel()
	file := &tools.PolicyFile{Tools: map[string]tools.UpstreamOverride{
		"records.put":    {HumanGated: new(bool), Mode: tools.ModeShadow},
		"records.delete": {Risk: policy.RiskLow},
	}}
	c := replay.NewCandidate(file, nil, func(name string) bool { return name == "records.put" || name == "records.delete" })
	if c.Covers("records.put") || !c.Covers("records.delete") {
		t.Fatalf("covers records.put %v, records.delete %v", c.Covers("records.put"), c.Covers("records.delete"))
	}
	if replay.KindOf(policy.StateAllowed, policy.StateDeferred) != replay.NewlyAsks || replay.KindOf(policy.StateDeferred, policy.StateDeferred) != "" {
		t.Fatal("KindOf does not name the change as the replay does")
	}
}
