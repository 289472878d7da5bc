package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func applied(t *testing.T, doc string) (*tools.Registry, error) {
	t.Helper()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	f, err := tools.ParsePolicyFile([]byte(doc), r.Classes(), func(string) string { return "" })
	if err != nil {
		return r, err
	}
	return r, tools.ApplyOverrides(r, f)
}

// The policy file overrides built-in tools' contracts too: limits,
// gating, escalation, runtime constraints, and (with a reason) the class.
func TestApplyOverrides_BuiltinToolsTakeWhatTheFileSays(t *testing.T) {
	t.Parallel()
	before, _ := tools.Builtin()
	r, err := applied(t, `
tools:
  records.get:
    rate_limits: {per_agent_per_minute: 120}
  records.delete:
    rate_limits: {per_agent_per_minute: 5, per_workspace_per_day: 200}
    quorum: 2
    escalate_after: 30m
    escalate_to: admin
  webhook.post:
    constraints:
      - {kind: domain_allowlist, values: [hooks.example.com]}
  payment.initiate:
    threshold: "amount > 100"
    constraints:
      - {kind: max_amount, amount: 5000}
  notes.append:
    risk: high
    class_rationale: Notes here reach customers, so a person looks first.
`)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) *tools.Tool {
		tool, ok := r.Get(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return tool
	}
	if got := get("records.get").Contract.RateLimits; got != (tools.RateLimits{PerAgentPerMinute: 120}) {
		t.Errorf("records.get limits %+v", got)
	}
	del := get("records.delete").Contract
	if del.RateLimits != (tools.RateLimits{PerAgentPerMinute: 5, PerWorkspacePerDay: 200}) || del.Gating.Quorum != 2 ||
		del.Gating.Escalation != (tools.Escalation{After: 30 * time.Minute, To: "admin"}) {
		t.Errorf("records.delete %+v %+v", del.RateLimits, del.Gating)
	}
	if cs := get("webhook.post").Contract.Constraints; len(cs) == 0 || cs[len(cs)-1].Kind != policy.ConstraintDomainAllowlist {
		t.Errorf("webhook.post constraints %+v", cs)
	}
	pay := get("payment.initiate")
	if pay.Contract.Gating.Threshold != "amount > 100" || !pay.ThresholdExceeded(map[string]any{"amount": 150.0}) || pay.ThresholdExceeded(map[string]any{"amount": 50.0}) {
		t.Errorf("payment.initiate threshold %q", pay.Contract.Gating.Threshold)
	}
	notes := get("notes.append").Contract
	if notes.Risk != policy.RiskHigh || !strings.HasPrefix(notes.ClassRationale, "Notes here reach customers") {
		t.Errorf("notes.append %s %q", notes.Risk, notes.ClassRationale)
	}
	if r.Hash() == before.Hash() {
		t.Error("the registry's hash did not change with its contracts")
	}
	// What the file does not name is as it was.
	if a, b := get("records.put").Contract.RateLimits, mustGet(t, before, "records.put").Contract.RateLimits; a != b {
		t.Errorf("records.put changed: %+v, was %+v", a, b)
	}
}

func mustGet(t *testing.T, r *tools.Registry, name string) *tools.Tool {
	t.Helper()
	tool, ok := r.Get(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return tool
}

// A bad override stops the file, naming its line, and leaves the registry
// as it was.
func TestApplyOverrides_RefusesWhatCannotHold(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ doc, want string }{
		"unknown tool":        {"tools:\n  records.explode:\n    risk: low\n", `line 2: tools: "records.explode" is not a built-in tool`},
		"class without why":   {"tools:\n  records.put:\n    authority: write-non-idempotent\n", "line 2: records.put: the file changes its class"},
		"authority misfit":    {"tools:\n  records.get:\n    authority: irreversible\n    class_rationale: a test that should fail to load\n", "does not fit"},
		"bad threshold":       {"tools:\n  payment.initiate:\n    threshold: \"amount >>> 3\"\n", "line 3: payment.initiate: threshold"},
		"bad constraint":      {"tools:\n  webhook.post:\n    constraints:\n      - {kind: max_amount}\n", "line 4: webhook.post: constraint max_amount"},
		"unknown constraint":  {"tools:\n  webhook.post:\n    constraints:\n      - {kind: sometimes}\n", "line 4:"},
		"constraint key typo": {"tools:\n  webhook.post:\n    constraints:\n      - {kind: domain_allowlist, value: [a.example]}\n", `unknown key "value"`},
		// Rules that would loosen a built-in tool's effect or a destructive
		// tool's path (issue 28's bad input).
		"a write called a read": {"tools:\n  records.put:\n    effect: read\n    authority: read\n    class_rationale: a test that should fail to load\n",
			"line 2: records.put: effect read (its code is mutate) would loosen it"},
		"a delete called a write": {"tools:\n  records.delete:\n    effect: mutate\n    authority: write-non-idempotent\n    class_rationale: a test that should fail to load\n",
			"line 2: records.delete: effect mutate (its code is destructive) would loosen it"},
		"a delete's class lowered": {"tools:\n  records.delete:\n    authority: write-non-idempotent\n    class_rationale: a test that should fail to load\n",
			"line 2: records.delete: authority write-non-idempotent"},
		"a delete's risk lowered": {"tools:\n  records.bulk_delete:\n    risk: medium\n    class_rationale: a test that should fail to load\n",
			"line 2: records.bulk_delete: risk medium"},
		"a payment ungated": {"tools:\n  payment.initiate:\n    human_gated: false\n", "line 2: payment.initiate: human_gated: false"},
	} {
		r, err := applied(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
			continue
		}
		before, _ := tools.Builtin()
		if r.Hash() != before.Hash() {
			t.Errorf("%s: a refused file changed the registry", name)
		}
	}
}

// The commented example file loads and applies as it is.
func TestExamplePolicyFile_LoadsAndApplies(t *testing.T) {
	t.Parallel()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	f, err := tools.LoadPolicyFile("../../examples/gatehouse.yaml", r.Classes(), func(k string) string { return "example-" + k })
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.ApplyOverrides(r, f); err != nil {
		t.Fatal(err)
	}
	if len(f.Tools) != 6 || len(f.Upstreams) != 1 {
		t.Fatalf("the example declares %d tools and %d upstreams", len(f.Tools), len(f.Upstreams))
	}
}

// An upstream tool takes a threshold, but not constraints: its arguments
// say nothing Gatehouse could check them against.
func TestParsePolicyFile_UpstreamToolsTakeNoConstraints(t *testing.T) {
	t.Parallel()
	r, _ := tools.Builtin()
	doc := "upstreams:\n  - name: pay\n    url: http://127.0.0.1:9/mcp\n    tools:\n      wire:\n        threshold: \"amount > 100\"\n"
	f, err := tools.ParsePolicyFile([]byte(doc), r.Classes(), func(string) string { return "" })
	if err != nil || f.Upstreams[0].Tools["wire"].Threshold != "amount > 100" {
		t.Fatalf("threshold: %v %+v", err, f)
	}
	doc += "        constraints:\n          - {kind: domain_allowlist, values: [a.example]}\n"
	if _, err := tools.ParsePolicyFile([]byte(doc), r.Classes(), func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "line 8: upstream pay: tool wire: constraints apply to built-in tools only") {
		t.Fatalf("constraints on an upstream tool: %v", err)
	}
}
