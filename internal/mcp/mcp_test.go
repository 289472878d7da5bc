package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestSplitArguments_TakesOutGatehousesOwn(t *testing.T) {
	t.Parallel()
	args, rationale, key, err := splitArguments(json.RawMessage(`{"path": "a", "rationale": "why not", "idempotency_key": "k-0000000000000001", "n": 1.5}`))
	if err != nil || string(args) != `{"n":1.5,"path":"a"}` || rationale != "why not" || key != "k-0000000000000001" {
		t.Fatalf("%s %q %q %v", args, rationale, key, err)
	}
	if args, _, _, err := splitArguments(nil); err != nil || string(args) != `{}` {
		t.Fatalf("no arguments: %s %v", args, err)
	}
	for _, bad := range []string{`[1]`, `{"rationale": 5}`, `{"idempotency_key": {}}`} {
		if _, _, _, err := splitArguments(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestInputSchema_AddsARequiredRationaleAndTheKeyWhereRequired(t *testing.T) {
	t.Parallel()
	tool := &tools.Tool{Name: "x.y", Effect: policy.EffectMutate, Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["a"],"properties":{"a":{"type":"string"}}}`)}
	s := inputSchema(tool)
	if r := s["required"].([]any); len(r) != 2 || r[1] != "rationale" || s["properties"].(map[string]any)["idempotency_key"] != nil {
		t.Fatalf("%v", s)
	}
	tool.Contract.Idempotency.Required = true
	if r := inputSchema(tool)["required"].([]any); len(r) != 3 || r[2] != "idempotency_key" {
		t.Fatalf("%v", r)
	}
	if string(tool.Schema) != `{"type":"object","additionalProperties":false,"required":["a"],"properties":{"a":{"type":"string"}}}` {
		t.Fatal("the declaration's schema was changed")
	}
}

func TestConversationTitle_NamesTheClientPrintably(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"claude-code":            "MCP: claude-code",
		"":                       "MCP: client",
		"a\x00b\nc":              "MCP: abc",
		strings.Repeat("é", 150): "MCP: " + strings.Repeat("é", 100),
	} {
		if got := conversationTitle(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestDiffLines(t *testing.T) {
	t.Parallel()
	got := diffLines([]string{"{", `"a": 1,`, `"b": 2`, "}"}, []string{"{", `"a": 1,`, `"b": 3`, "}"})
	var ops string
	for _, l := range got {
		ops += l.Op
	}
	if ops != "  -+ " {
		t.Fatalf("%q: %v", ops, got)
	}
	if got := diffLines(nil, []string{"x"}); len(got) != 1 || got[0].Op != "+" {
		t.Fatalf("%v", got)
	}
}
