package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// statSchema is the output schema of the fake upstream's stat tool, with a
// $ref into its own $defs (as schemas made by pydantic or zod have).
const statSchema = `{"type":"object","additionalProperties":false,"required":["path","size","owner"],
	"properties":{"path":{"type":"string"},"size":{"type":"integer"},"owner":{"$ref":"#/$defs/owner"}},
	"$defs":{"owner":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}}`

// statResult is what stat answers, as structured content.
var statResult = map[string]any{"path": "a.txt", "size": float64(42), "owner": map[string]any{"name": "ana"}}

// outputUpstream is an MCP server whose tools declare output schemas:
// stat (a read), wipe (destructive: its calls wait for a person) and
// count, whose output schema is not an object schema.
func outputUpstream(t *testing.T) (*sdk.Server, string) {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "files", Version: "1"}, nil)
	in := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: boolp(false), IdempotentHint: true, OpenWorldHint: boolp(false)}
	srv.AddTool(&sdk.Tool{Name: "stat", Description: "Size and owner of a file.", InputSchema: in, OutputSchema: json.RawMessage(statSchema), Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a.txt: 42 bytes, ana"}}, StructuredContent: statResult}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "wipe", Description: "Wipe a file.", InputSchema: in,
		OutputSchema: json.RawMessage(`{"type":"object","required":["wiped"],"properties":{"wiped":{"type":"boolean"}}}`),
		Annotations:  &sdk.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(false)}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "wiped"}}, StructuredContent: map[string]any{"wiped": true}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "count", Description: "Count the files.", InputSchema: in, OutputSchema: json.RawMessage(`{"type":"integer"}`), Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

const outputPolicy = `
upstreams:
  - name: files
    url: %s
    timeout: 2s
    accept: [stat, wipe, count]
`

// validates reports whether v matches the JSON Schema schema.
func validates(t *testing.T, schema, v any) error {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("output.json")
	if err != nil {
		t.Fatalf("the listed output schema does not compile: %v\n%s", err, raw)
	}
	b, _ := json.Marshal(v)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return sch.Validate(inst)
}

// An upstream tool's output schema is listed to agents (the upstream's,
// or one of Gatehouse's own answers about the call), and a call that ran
// carries the upstream's structuredContent through unchanged: a client
// that checks results against the listed schema accepts the upstream's
// result, a waiting call's answer and a refusal, and still rejects what
// matches none of them.
func TestMCPUpstreams_AnOutputSchemaIsListedAndStructuredContentCarriedThrough(t *testing.T) {
	t.Parallel()
	_, url := outputUpstream(t)
	e, _ := newEnvPolicy(t, fmt.Sprintf(outputPolicy, url))
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	s := e.mustMCP(agent, "claude-code", nil)

	byName, _ := listTools(t, s)
	stat := byName["files.stat"]
	if stat == nil || stat.OutputSchema == nil {
		t.Fatalf("files.stat is not listed with an output schema: %+v", stat)
	}
	var listed map[string]any
	b, _ := json.Marshal(stat.OutputSchema)
	json.Unmarshal(b, &listed)
	if listed["type"] != "object" {
		t.Errorf("the listed output schema's root is not an object schema: %s", b)
	}
	// The upstream's own schema is its first alternative, its $ref rebased.
	var want map[string]any
	json.Unmarshal([]byte(strings.Replace(statSchema, "#/$defs/owner", "#/anyOf/0/$defs/owner", 1)), &want)
	if alts, _ := listed["anyOf"].([]any); len(alts) == 0 || !reflect.DeepEqual(alts[0], want) {
		t.Fatalf("the upstream's schema is not listed as it declared it:\n%s", b)
	}
	if byName["files.count"] != nil {
		t.Error("a tool whose output schema is not an object schema is listed")
	}

	// A call that ran: the upstream's structured content, unchanged, and
	// valid against the listed schema.
	res, text := callTool(t, s, "files.stat", map[string]any{"path": "a.txt", "rationale": "check the file's size first"})
	if res.IsError || text != "a.txt: 42 bytes, ana" {
		t.Fatalf("stat: %s", text)
	}
	if got := structured(t, res); !reflect.DeepEqual(got, statResult) {
		t.Fatalf("structured content %v, want the upstream's %v", got, statResult)
	}
	if err := validates(t, stat.OutputSchema, res.StructuredContent); err != nil {
		t.Errorf("the upstream's result does not match the listed schema: %v", err)
	}
	if err := validates(t, stat.OutputSchema, map[string]any{"path": "a.txt", "size": "big", "owner": map[string]any{"name": "ana"}}); err == nil {
		t.Error("the listed schema accepts a result that matches neither the upstream's schema nor Gatehouse's answers")
	}

	// A call that waits for a person answers Gatehouse's own structured
	// content, which matches the listed schema too.
	wipe := byName["files.wipe"]
	if wipe == nil || wipe.OutputSchema == nil {
		t.Fatalf("files.wipe is not listed with an output schema: %+v", wipe)
	}
	res, text = callTool(t, s, "files.wipe", map[string]any{"path": "a.txt", "rationale": "the owner asked to wipe it",
		"idempotency_key": "wipe-a-txt-0000000001"})
	if st := structured(t, res)["status"]; res.IsError || st != "pending_approval" {
		t.Fatalf("wipe did not wait for the owner: %s", text)
	}
	if err := validates(t, wipe.OutputSchema, res.StructuredContent); err != nil {
		t.Errorf("a waiting call's answer does not match the listed schema: %v", err)
	}
	// A refusal as well.
	res, text = callTool(t, s, "files.wipe", map[string]any{"path": "a.txt", "rationale": "the owner asked to wipe it"})
	if !res.IsError || res.StructuredContent == nil {
		t.Fatalf("wipe without a key: %s", text)
	}
	if err := validates(t, wipe.OutputSchema, res.StructuredContent); err != nil {
		t.Errorf("a refusal does not match the listed schema: %v", err)
	}
}

// The output schema is part of the pinned definition: an upstream that
// changes it holds the tool until an admin accepts the change, and while
// it is held agents are shown the output schema that was pinned.
func TestMCPUpstreams_AChangedOutputSchemaHoldsTheTool(t *testing.T) {
	t.Parallel()
	srv, url := outputUpstream(t)
	e, _ := newEnvPolicy(t, fmt.Sprintf(outputPolicy, url))
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	s := e.mustMCP(agent, "claude-code", nil)
	args := map[string]any{"path": "a.txt", "rationale": "check the file's size first"}
	if res, text := callTool(t, s, "files.stat", args); res.IsError {
		t.Fatalf("stat before the change: %s", text)
	}

	// Only the output schema changes (size becomes a string); the SDK's
	// server announces it (list_changed).
	var ran atomic.Int32
	changed := strings.Replace(statSchema, `"size":{"type":"integer"}`, `"size":{"type":"string"}`, 1)
	srv.AddTool(&sdk.Tool{Name: "stat", Description: "Size and owner of a file.",
		InputSchema:  map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
		OutputSchema: json.RawMessage(changed),
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: boolp(false), IdempotentHint: true, OpenWorldHint: boolp(false)}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ran.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "big"}}, StructuredContent: map[string]any{"size": "big"}}, nil
		})
	waitFor(t, "stat to be held", func() bool { return e.pinStatus("stat") == "held" })

	res, text := callTool(t, s, "files.stat", args)
	if !res.IsError || !strings.Contains(text, "files.stat is held: its output schema changed upstream") {
		t.Fatalf("a tool whose output schema changed must be refused naming it: %s", text)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the redefined tool ran %d times", n)
	}
	byName, _ := listTools(t, e.mustMCP(agent, "claude-code", nil))
	b, _ := json.Marshal(byName["files.stat"].OutputSchema)
	if !strings.Contains(string(b), `"size":{"type":"integer"}`) || strings.Contains(string(b), `"size":{"type":"string"}`) {
		t.Fatalf("a held tool is listed with its new output schema: %s", b)
	}
	// The other tools' pins did not move.
	if st := e.pinStatus("wipe"); st != "accepted" {
		t.Fatalf("wipe's pin: %q", st)
	}
}
