package tools

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/policy"
)

// A shadow rule (mode: shadow) is not enforced: the tool is declared as if
// the file said nothing of it, with the rule's declaration as its shadow,
// named by a hash of it; the registry's hash changes with the rule.
func TestShadowRules_AreDeclaredBesideTheToolNotEnforced(t *testing.T) {
	t.Parallel()
	r, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	before := r.Hash()
	f, err := ParsePolicyFile([]byte("tools:\n  records.put:\n    threshold: \"value.amount > 100\"\n    mode: shadow\n"), r.Classes(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReplacePolicy(f, nil); err != nil {
		t.Fatal(err)
	}
	put, _ := r.Get("records.put")
	if put.Contract.Gating.Threshold != "" || put.Shadow == nil || put.Shadow.Contract.Gating.Threshold != "value.amount > 100" || len(put.ShadowRule) != 16 {
		t.Fatalf("records.put: threshold %q, shadow %+v, rule %q", put.Contract.Gating.Threshold, put.Shadow, put.ShadowRule)
	}
	if !put.Shadow.ThresholdExceeded(map[string]any{"value": map[string]any{"amount": 500.0}}) || put.ThresholdExceeded(map[string]any{"value": map[string]any{"amount": 500.0}}) {
		t.Fatal("the shadow's threshold is not the one that holds on the shadow alone")
	}
	if r.Hash() == before {
		t.Fatal("adding a shadow rule left the registry's hash as it was")
	}
	// Promoted: enforced, no shadow.
	f, _ = ParsePolicyFile([]byte("tools:\n  records.put:\n    threshold: \"value.amount > 100\"\n"), r.Classes(), func(string) string { return "" })
	if err := r.ReplacePolicy(f, nil); err != nil {
		t.Fatal(err)
	}
	if put, _ := r.Get("records.put"); put.Shadow != nil || put.Contract.Gating.Threshold != "value.amount > 100" {
		t.Fatalf("promoted: %+v", put)
	}
	// A bad mode names its line; a caller tool cannot be a shadow rule.
	for doc, want := range map[string]string{
		"tools:\n  records.put:\n    mode: dry\n": "line 3: records.put: mode must be enforce",
		"caller_tools:\n  - name: app.send\n    description: Send.\n    effect: mutate\n    authority: write-idempotent\n    action_class: tool.call.local\n    class_rationale: It sends one thing.\n    mode: shadow\n": "line 2: caller_tools: app.send: mode: shadow",
	} {
		if _, err := ParsePolicyFile([]byte(doc), r.Classes(), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", doc, err, want)
		}
	}
}

// An upstream tool's shadow rule: declared from its annotations alone,
// the override as its shadow.
func TestShadowRules_AnUpstreamToolsRule(t *testing.T) {
	t.Parallel()
	cfg := UpstreamConfig{Name: "files", Tools: map[string]UpstreamOverride{"read": {Effect: policy.EffectDestructive, Mode: ModeShadow}}}
	decl, err := DeclareUpstream(cfg, UpstreamTool{Upstream: "files", Name: "read", Annotations: Annotations{ReadOnly: yes(), OpenWorld: no()}}, acceptAll{})
	if err != nil {
		t.Fatal(err)
	}
	if decl.Effect != policy.EffectRead || decl.Shadow == nil || decl.Shadow.Effect != policy.EffectDestructive {
		t.Fatalf("declared %s, shadow %+v", decl.Effect, decl.Shadow)
	}
	r, _ := Builtin()
	if err := r.ReplaceUpstream("files", []Tool{decl}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get("files.read"); got.ShadowRule == "" || got.Shadow.Effect != policy.EffectDestructive {
		t.Fatalf("in the registry: %+v", got)
	}
}
