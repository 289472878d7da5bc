package replay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// tally replays one recorded call under file, its upstream tool "up.drop"
// listed with no hints.
func tally(t *testing.T, file string, call policy.Call, status string) replay.Report {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	f, err := tools.ParsePolicyFile([]byte(file), registry.Classes(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(call)
	tl := replay.NewTally(replay.NewCandidate(f, nil, func(name string) bool { t, ok := registry.Get(name); return ok && t.Upstream == "" }), registry.Classes(), 2)
	tl.Add(replay.Call{ID: uuid.New(), Tool: call.Tool, Status: status, Input: input, CreatedAt: time.Now()})
	return tl.Report()
}

// A destructive tool that waited for an approver, declared a plain
// change without gating: it would run at once in an auto conversation.
func TestTally_LooseningADestructiveToolIsNewlyAllowedDestructive(t *testing.T) {
	t.Parallel()
	recorded := policy.Call{Scope: policy.ScopeConversation, Mode: policy.ModeAuto, Effect: policy.EffectDestructive, Risk: policy.RiskHigh,
		HumanGated: true, ActionClass: "tool.call.local", Tool: "up.drop", Constraints: []string{}}
	r := tally(t, `upstreams:
  - name: up
    command: ["up"]
    tools:
      drop: {effect: mutate, human_gated: false}
`, recorded, "rejected")
	g := r.Groups[0]
	if g.NewlyAllowed != 1 || g.NewlyAllowedDestructive != 1 || g.Overruled != 1 || g.ApprovalsSaved != 1 || len(g.Examples[replay.NewlyAllowedDestructive]) != 1 ||
		r.Covered != 1 || len(r.NoAnnotations) != 1 || r.NoAnnotations[0] != "up.drop" {
		t.Fatalf("report %+v", r)
	}
	if ex := g.Examples[replay.NewlyAllowed][0]; ex.Before != policy.StateDeferred || ex.After != policy.StateAllowed {
		t.Fatalf("example %+v", ex)
	}
}

func TestTally_EveryKindOfChange(t *testing.T) {
	t.Parallel()
	base := policy.Call{Scope: policy.ScopeConversation, Mode: policy.ModeApprove, Effect: policy.EffectMutate, Risk: policy.RiskMedium,
		ActionClass: "tool.call.local", Tool: "up.drop", Constraints: []string{}}
	read := base
	read.Effect, read.Risk, read.ActionClass = policy.EffectRead, policy.RiskLow, "read.context"
	held := base
	held.ActionClass = "" // held when it was called: blocked whatever the file says
	readOnlyToken := read
	readOnlyToken.TokenScope = &policy.TokenScope{ReadOnly: true}
	file := func(override string) string {
		return "upstreams:\n  - name: up\n    command: [\"up\"]\n    tools:\n      drop: " + override + "\n"
	}
	for name, c := range map[string]struct {
		file   string
		call   policy.Call
		want   replay.Kind
		saved  int
		cost   int
		covers bool
	}{
		"a change declared a read runs":              {file("{effect: read}"), base, replay.NewlyAllowed, 1, 0, true},
		"a read declared a change asks":              {file("{effect: mutate, authority: write-idempotent}"), read, replay.NewlyAsks, 0, 1, true},
		"a change declared human-gated is restated":  {file("{human_gated: true}"), base, replay.Restated, 0, 0, true},
		"a read-only token's read declared a change": {file("{effect: mutate}"), readOnlyToken, replay.NewlyBlocked, 0, 0, true},
		"a held tool stays blocked":                  {file("{effect: read}"), held, "", 0, 0, true},
		"the file's own declaration changes nothing": {file("{effect: mutate, authority: write-non-idempotent, action_class: tool.call.local}"), base, "", 0, 0, true},
		"another upstream's tool is not covered":     {"upstreams:\n  - name: other\n    command: [\"o\"]\n", base, "", 0, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			r := tally(t, c.file, c.call, "applied")
			g := r.Groups[0]
			got := replay.Kind("")
			for _, k := range replay.Kinds {
				if g.Of(k) > 0 {
					got = k
				}
			}
			if got != c.want || g.ApprovalsSaved != c.saved || g.ApprovalsCost != c.cost || g.Covered != c.covers || g.Of(replay.Changed) != min(1, len(c.want)) {
				t.Fatalf("got %q %+v", got, g)
			}
		})
	}
}

func TestParseKinds(t *testing.T) {
	t.Parallel()
	got, err := replay.ParseKinds("newly-allowed, newly-allowed-destructive,newly-allowed")
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "newly-allowd", ","} {
		if _, err := replay.ParseKinds(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}
