package tools_test

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/apperr"
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

// A declaration tightens the file's entry point by point; kept with a
// call, it is read again under the file as it is now, the stricter of
// the two holding on each point.
func TestDeclaredTool_TightensTheFileAndIsReadAgainUnderTheFileAsItIsNow(t *testing.T) {
	t.Parallel()
	r, err := declared(t, `
caller_tools:
  - name: app.sync
    description: Sync the agent's cache with the shop.
    effect: mutate
    authority: write-idempotent
    action_class: tool.call.local
    class_rationale: Syncing again writes the same cache.
    human_gated: false
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                 string
		decl                 tools.CallerDeclaration
		effect, authority    string
		class                string
		gated, key           bool
		wantErr, errorFields string
	}{
		{"the same", tools.CallerDeclaration{Description: "Sync.", Effect: "mutate", Authority: "write-idempotent"}, "mutate", "write-idempotent", "tool.call.local", false, false, "", ""},
		{"a stricter authority", tools.CallerDeclaration{Description: "Sync.", Effect: "mutate", Authority: "write-non-idempotent"}, "mutate", "write-non-idempotent", "tool.call.local", false, true, "", ""},
		{"destructive and irreversible", tools.CallerDeclaration{Description: "Sync.", Effect: "destructive", Authority: "irreversible"}, "destructive", "irreversible", "tool.call.local", true, true, "", ""},
		{"a stricter group", tools.CallerDeclaration{Description: "Sync.", Effect: "mutate", Authority: "write-idempotent", ActionClass: "email.send.external"}, "mutate", "write-idempotent", "email.send.external", false, false, "", ""},
		{"looser", tools.CallerDeclaration{Description: "Sync.", Effect: "read", Authority: "read"}, "", "", "", false, false, "looser", "declaration.effect declaration.authority"},
		{"another class of the same group", tools.CallerDeclaration{Description: "Sync.", Effect: "mutate", Authority: "write-idempotent", ActionClass: "draft.compose"}, "", "", "", false, false, "looser", "declaration.action_class"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool, kept, err := r.DeclaredTool("app.sync", c.decl)
			if c.wantErr != "" {
				var fields []string
				if ae, ok := err.(*apperr.Error); ok {
					for _, f := range ae.Fields {
						fields = append(fields, f.Field)
					}
				}
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Join(fields, " ") != c.errorFields {
					t.Fatalf("got %v (%v), want %q naming %s", err, fields, c.wantErr, c.errorFields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			k := tool.Contract
			if string(tool.Effect) != c.effect || string(k.Authority) != c.authority || k.ActionClass != c.class || k.Gating.Required != c.gated ||
				k.Idempotency.Required != c.key || !tool.Caller || tool.Description != "Sync the agent's cache with the shop." {
				t.Fatalf("tool: %s %s %s gated %v key %v", tool.Effect, k.Authority, k.ActionClass, k.Gating.Required, k.Idempotency.Required)
			}
			again, err := r.RedeclaredTool("app.sync", kept)
			if err != nil || again.Effect != tool.Effect || again.Contract.Authority != k.Authority || again.Contract.ActionClass != k.ActionClass {
				t.Fatalf("read again: %+v %v", again, err)
			}
		})
	}

	// The file became stricter than a declaration kept with a call: the
	// file holds where it is stricter, the declaration where it is.
	_, kept, err := r.DeclaredTool("app.sync", tools.CallerDeclaration{Description: "Sync.", Effect: "mutate", Authority: "write-non-idempotent"})
	if err != nil {
		t.Fatal(err)
	}
	stricter, err := declared(t, `
caller_tools:
  - name: app.sync
    description: Sync the agent's cache with the shop.
    effect: destructive
    authority: write-non-idempotent
    action_class: email.send.external
    class_rationale: A sync now mails the shop's customers.
`)
	if err != nil {
		t.Fatal(err)
	}
	now, err := stricter.RedeclaredTool("app.sync", kept)
	if err != nil || now.Effect != "destructive" || now.Contract.Authority != "write-non-idempotent" || now.Contract.ActionClass != "email.send.external" || now.Contract.Risk != "high" {
		t.Fatalf("under the stricter file: %+v %v", now, err)
	}

	// Without a file entry: the declaration alone, its class by default.
	fresh, _, err := r.DeclaredTool("app.lookup", tools.CallerDeclaration{Description: "Look up.", Effect: "read", Authority: "read"})
	if err != nil || fresh.Contract.ActionClass != "read.context" || fresh.Contract.Risk != "low" || !fresh.Caller {
		t.Fatalf("fresh: %+v %v", fresh, err)
	}
	if !r.MayDeclare("app.lookup") || r.MayDeclare("records.put") || r.MayDeclare("records.export") || r.MayDeclare("Nope") {
		t.Fatal("MayDeclare")
	}
}

func TestCallerDeclarations_ThePolicyFileMayRefuseThem(t *testing.T) {
	t.Parallel()
	r, err := declared(t, "caller_declarations: refuse\n")
	if err != nil {
		t.Fatal(err)
	}
	if !r.DeclarationsRefused() {
		t.Fatal("not refused")
	}
	if _, _, err := r.DeclaredTool("app.lookup", tools.CallerDeclaration{Description: "Look up.", Effect: "read", Authority: "read"}); err == nil ||
		!strings.Contains(err.Error(), "caller_declarations: refuse") {
		t.Fatalf("declared: %v", err)
	}
	if _, err := declared(t, "caller_declarations: maybe\n"); err == nil || !strings.Contains(err.Error(), "line 1: caller_declarations must be allow or refuse") {
		t.Fatalf("a bad value: %v", err)
	}
	if r, err := declared(t, "caller_declarations: allow\n"); err != nil || r.DeclarationsRefused() {
		t.Fatalf("allow: %v", err)
	}
}
