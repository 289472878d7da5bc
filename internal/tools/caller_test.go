package tools_test

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/tools"
)

func declared(t *testing.T, doc string) (*tools.Registry, error) {
	t.Helper()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	f, err := tools.ParsePolicyFile([]byte(doc), r.Classes(), func(string) string { return "" })
	if err != nil {
		return r, err
	}
	return r, tools.DeclareCallerTools(r, f)
}

// A caller tool is a registry tool Gatehouse never runs: neither an
// executor nor a deliverer, its contract as the file says.
func TestDeclareCallerTools_TheFilesToolsJoinTheRegistry(t *testing.T) {
	t.Parallel()
	before, _ := tools.Builtin()
	r, err := declared(t, `
caller_tools:
  - name: app.send_invoice
    description: Send an invoice from the agent's billing system.
    effect: mutate
    authority: write-non-idempotent
    action_class: tool.call.local
    class_rationale: Each call sends one more invoice to the customer.
    approver_role: finance-approver
    schema:
      type: object
      required: [invoice]
      properties: {invoice: {type: string}}
  - name: app.wire
    description: Wire money from the agent's bank connection.
    effect: destructive
    authority: irreversible
    action_class: tool.call.local
    risk: high
    class_rationale: A wire cannot be called back once the bank sent it.
`)
	if err != nil {
		t.Fatal(err)
	}
	inv, ok := r.Get("app.send_invoice")
	if !ok || !inv.Caller || inv.Execute != nil || inv.Deliver != nil || inv.Outside() {
		t.Fatalf("app.send_invoice: %+v", inv)
	}
	if !inv.Contract.Idempotency.Required || inv.Contract.Gating.ApproverRole != "finance-approver" || inv.Contract.RateLimits.PerAgentPerMinute != 10 {
		t.Fatalf("contract: %+v", inv.Contract)
	}
	if err := inv.ValidateArguments([]byte(`{"amount": 3}`)); err == nil || !strings.Contains(err.Error(), "arguments.invoice") {
		t.Fatalf("schema: %v", err)
	}
	if wire, _ := r.Get("app.wire"); !wire.Contract.Gating.Required {
		t.Fatal("an irreversible caller tool is human-gated by default")
	}
	if r.Hash() == before.Hash() || strings.Join(r.CallerTools(), ",") != "app.send_invoice,app.wire" {
		t.Fatalf("hash or names: %v", r.CallerTools())
	}
	if _, ok := r.Get("records.put"); !ok {
		t.Fatal("the built-in tools stay")
	}
}

func TestDeclareCallerTools_ABadDeclarationNamesItsLine(t *testing.T) {
	t.Parallel()
	ok := "    effect: mutate\n    authority: write-idempotent\n    action_class: tool.call.local\n    class_rationale: It overwrites what it wrote before.\n"
	for _, c := range []struct{ name, doc, want string }{
		{"not a list", "caller_tools: {a: 1}\n", "line 1: caller_tools must be a list"},
		{"bad name", "caller_tools:\n  - name: Send\n    description: d\n" + ok, "line 2: caller_tools: a tool needs a name"},
		{"no description", "caller_tools:\n  - name: app.x\n" + ok, "line 2: app.x: description"},
		{"no class", "caller_tools:\n  - name: app.x\n    description: d\n    effect: mutate\n    authority: write-idempotent\n", "line 2: app.x: a caller tool declares its action_class"},
		{"unknown key", "caller_tools:\n  - name: app.x\n    description: d\n    colour: red\n" + ok, `line 4: unknown key "colour"`},
		{"authority against effect", "caller_tools:\n  - name: app.x\n    description: d\n    effect: read\n    authority: irreversible\n    action_class: tool.call.local\n    class_rationale: It overwrites what it wrote before.\n", "authority irreversible does not fit effect read"},
		{"schema not an object", "caller_tools:\n  - name: app.x\n    description: d\n    schema: {type: string}\n" + ok, "line 4: schema must be"},
		{"twice", "caller_tools:\n  - name: app.x\n    description: d\n" + ok + "  - name: app.x\n    description: d\n" + ok, "line 8: caller_tools: app.x is declared twice (first on line 2)"},
		{"a built-in's name", "caller_tools:\n  - name: records.put\n    description: d\n" + ok, "line 2: caller_tools: records.put is the name of a tool Gatehouse runs"},
		{"an upstream's group", "upstreams:\n  - name: app\n    url: https://mcp.example/\ncaller_tools:\n  - name: app.x\n    description: d\n" + ok, "line 5: caller_tools: app.x is named like a tool of upstream app"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := declared(t, c.doc); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
