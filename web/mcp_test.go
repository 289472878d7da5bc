package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// mcpHeaders adds the bearer token and any binding headers to every
// request of an MCP client.
type mcpHeaders struct {
	header http.Header
	base   http.RoundTripper
}

func (h mcpHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.header {
		r.Header[k] = vs
	}
	return h.base.RoundTrip(r)
}

// legacy makes the SDK's client speak 2025-11-25 (initialize, a session
// id, held calls answered as pending with check_proposal): the revision
// most of these tests are about. The SDK's client otherwise speaks
// 2026-07-28 (stateless; mcp_stateless_test.go).
var legacy = &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// mcpConnect connects the SDK's client, named client, to the server's
// /mcp endpoint with token and the extra headers (and query).
func (e *env) mcpConnect(token, client, query string, header map[string]string) (*sdk.ClientSession, error) {
	e.t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		h.Set(k, v)
	}
	transport := &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp" + query, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: mcpHeaders{header: h, base: http.DefaultTransport}, Timeout: 30 * time.Second}}
	c := sdk.NewClient(&sdk.Implementation{Name: client, Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.Connect(ctx, transport, legacy)
}

func (e *env) mustMCP(token, client string, header map[string]string) *sdk.ClientSession {
	e.t.Helper()
	s, err := e.mcpConnect(token, client, "", header)
	if err != nil {
		e.t.Fatalf("connect over MCP: %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// callTool calls a tool and returns the result with its text.
func callTool(t *testing.T, s *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return res, strings.Join(texts, "\n")
}

// structured is a result's structured content as a map.
func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

func TestMCP_ListsEveryToolWithARequiredRationaleAndItsAnnotations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	s := e.mustMCP(e.token("owner@example.com", auth.TokenAgent), "claude-code", nil)
	ctx := context.Background()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"records.search", "records.put", "records.delete", "notes.append", "webhook.post", "check_proposal"} {
		if byName[name] == nil {
			t.Fatalf("tools/list lacks %s: %v", name, byName)
		}
	}
	schemaOf := func(name string) map[string]any {
		b, _ := json.Marshal(byName[name].InputSchema)
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	required := func(name string) []any { r, _ := schemaOf(name)["required"].([]any); return r }
	for _, name := range []string{"records.search", "records.put", "records.delete"} {
		props := schemaOf(name)["properties"].(map[string]any)
		rationale, _ := props["rationale"].(map[string]any)
		if rationale == nil || rationale["minLength"] != float64(10) || !slices.Contains(required(name), any("rationale")) {
			t.Errorf("%s: rationale is not a required string of at least 10: %v", name, schemaOf(name))
		}
	}
	if !slices.Contains(required("notes.append"), any("idempotency_key")) || slices.Contains(required("records.put"), any("idempotency_key")) {
		t.Errorf("idempotency_key must be required exactly where the tool requires a key: notes.append %v, records.put %v", required("notes.append"), required("records.put"))
	}
	ann := func(name string) *sdk.ToolAnnotations { return byName[name].Annotations }
	if a := ann("records.search"); a == nil || !a.ReadOnlyHint || !a.IdempotentHint || *a.DestructiveHint || *a.OpenWorldHint {
		t.Errorf("records.search annotations: %+v", a)
	}
	if a := ann("records.put"); a.ReadOnlyHint || !a.IdempotentHint || *a.DestructiveHint {
		t.Errorf("records.put annotations: %+v", a)
	}
	if a := ann("records.delete"); a.ReadOnlyHint || a.IdempotentHint || !*a.DestructiveHint {
		t.Errorf("records.delete annotations: %+v", a)
	}
	if a := ann("notes.append"); a.IdempotentHint {
		t.Errorf("notes.append is write-non-idempotent: %+v", a)
	}
	if a := ann("webhook.post"); !*a.OpenWorldHint {
		t.Errorf("webhook.post reaches the outside world: %+v", a)
	}
	if a := ann("email.send"); !*a.OpenWorldHint {
		t.Errorf("email.send can be external: %+v", a)
	}
	if byName["records.bulk_delete"].Title == "" || byName["records.search"].Annotations.Title == "" {
		t.Error("tools have no title")
	}
}

func TestMCP_ReadRunsAtOnceInTheSessionsOwnConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	s := e.mustMCP(agent, "claude-code", nil)
	if ins := s.InitializeResult().Instructions; !strings.Contains(ins, `a new conversation, "MCP: claude-code", which its first tool call creates (`+e.url+"/conversations lists it)") {
		t.Errorf("the instructions do not say where the session's calls go: %s", ins)
	}
	// Listing the tools creates nothing: a one-shot client that only
	// looks leaves no conversation behind.
	if _, err := s.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, list := e.api("GET", "/api/v1/conversations", user, nil); len(list["conversations"].([]any)) != 0 {
		t.Fatalf("listing the tools made a conversation: %v", list)
	}
	res, text := callTool(t, s, "records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"})
	if res.IsError || !strings.Contains(text, `"status":"applied"`) || !strings.Contains(text, `"count":0`) {
		t.Fatalf("read: %v %s", res.IsError, text)
	}
	// The session created one conversation, named after the client, and
	// the call is in its transcript.
	_, list := e.api("GET", "/api/v1/conversations", user, nil)
	convs := list["conversations"].([]any)
	if len(convs) != 1 || convs[0].(map[string]any)["title"] != "MCP: claude-code" {
		t.Fatalf("conversations: %v", convs)
	}
	id := convs[0].(map[string]any)["id"].(string)
	_, msgs := e.api("GET", "/api/v1/conversations/"+id+"/messages", user, nil)
	if m := msgs["messages"].([]any); len(m) != 1 || m[0].(map[string]any)["content"] != "records.search" {
		t.Fatalf("transcript: %v", m)
	}
	// A second call stays in the same conversation.
	callTool(t, s, "records.search", map[string]any{"query": "beta", "rationale": "find another record"})
	if _, list := e.api("GET", "/api/v1/conversations", user, nil); len(list["conversations"].([]any)) != 1 {
		t.Fatalf("a second call made another conversation: %v", list)
	}
}

func TestMCP_ChangeInApproveModeWaitsForTheOwnerThenCheckProposalReadsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "Plans"})
	s := e.mustMCP(agent, "cursor", map[string]string{"Gatehouse-Conversation": conv["id"].(string)})

	start := time.Now()
	res, text := callTool(t, s, "records.put", map[string]any{"collection": "crm", "key": "acme", "value": map[string]any{"tier": "gold"},
		"rationale": "the owner asked to upgrade Acme"})
	if res.IsError || time.Since(start) > 5*time.Second {
		t.Fatalf("a pending call must come back promptly, not as an error: %v %s", res.IsError, text)
	}
	data := structured(t, res)
	id, _ := data["proposal_id"].(string)
	if data["status"] != "pending" || id == "" || !strings.Contains(text, "owner's confirmation") || !strings.Contains(text, "check_proposal") ||
		!strings.HasPrefix(data["confirm_url"].(string), e.url+"/conversations/"+conv["id"].(string)) {
		t.Fatalf("pending: %s %v", text, data)
	}
	// check_proposal takes a rationale like every tool (ADR-036): without
	// one it reads nothing; with one, the check and its reason are audited.
	res, text = callTool(t, s, "check_proposal", map[string]any{"proposal_id": id})
	if !res.IsError || !strings.Contains(text, "rationale") || structured(t, res)["code"] != "invalid" {
		t.Fatalf("check without a rationale: %s", text)
	}
	res, text = callTool(t, s, "check_proposal", map[string]any{"proposal_id": id, "rationale": "has the owner decided on Acme yet?"})
	if res.IsError || structured(t, res)["status"] != "pending" {
		t.Fatalf("check while pending: %s", text)
	}
	var checked []string
	rows, _ := e.pool.Query(t.Context(), "SELECT actor_kind || ' ' || (data->>'status') || ' ' || (data->>'rationale') FROM audit_events WHERE action = 'proposal.checked' AND subject_id = $1", id)
	for rows.Next() {
		var c string
		rows.Scan(&c)
		checked = append(checked, c)
	}
	if len(checked) != 1 || checked[0] != "agent pending has the owner decided on Acme yet?" {
		t.Fatalf("audited checks: %q, want the one with a rationale", checked)
	}
	if resp, p := e.api("POST", "/api/v1/proposals/"+id+"/apply", user, nil); resp.StatusCode != http.StatusOK || p["status"] != "applied" {
		t.Fatalf("the owner applies: %d %v", resp.StatusCode, p)
	}
	res, text = callTool(t, s, "check_proposal", map[string]any{"proposal_id": id, "rationale": "see whether Acme's upgrade ran"})
	if res.IsError || structured(t, res)["status"] != "applied" || !strings.Contains(text, `"tier":"gold"`) {
		t.Fatalf("check after apply: %s", text)
	}
	// A rejected call reads as a tool error carrying the reason.
	res, _ = callTool(t, s, "records.put", map[string]any{"collection": "crm", "key": "beta", "value": map[string]any{},
		"rationale": "the owner asked to create Beta"})
	id = structured(t, res)["proposal_id"].(string)
	if resp, _ := e.api("POST", "/api/v1/proposals/"+id+"/reject", user, map[string]any{"reason": "Beta is not a customer"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	res, text = callTool(t, s, "check_proposal", map[string]any{"proposal_id": id, "rationale": "see whether Beta was created"})
	if !res.IsError || !strings.Contains(text, "Beta is not a customer") {
		t.Fatalf("check after reject: %s", text)
	}
}

func TestMCP_RefusalsAreToolErrorsWithTheirReasons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	s := e.mustMCP(e.token("owner@example.com", auth.TokenAgent), "generic", nil)

	for name, args := range map[string]map[string]any{
		"no rationale":    {"query": "acme"},
		"short rationale": {"query": "acme", "rationale": "because"},
	} {
		res, text := callTool(t, s, "records.search", args)
		if !res.IsError || !strings.Contains(text, "rationale") {
			t.Errorf("%s: %v %s", name, res.IsError, text)
		}
	}
	// Bad arguments: 422 naming the field.
	res, text := callTool(t, s, "records.get", map[string]any{"collection": "c", "rationale": "read the record"})
	if !res.IsError || !strings.Contains(text, "arguments.key") {
		t.Errorf("missing argument: %s", text)
	}
	// A key is required for a write-non-idempotent tool.
	res, text = callTool(t, s, "notes.append", map[string]any{"collection": "c", "key": "k", "text": "hi", "rationale": "note the call outcome"})
	if !res.IsError || !strings.Contains(text, "idempotency_key") {
		t.Errorf("no key: %s", text)
	}
	// A human-only call is refused, with the decision's reasons.
	res, text = callTool(t, s, "payment.initiate", map[string]any{"amount": 12.5, "currency": "EUR", "payee": "ACME", "idempotency_key": "pay-acme-0000000001",
		"rationale": "pay the invoice"})
	data := structured(t, res)
	if !res.IsError || !strings.Contains(text, "human-only") || data["decision"] == nil {
		t.Errorf("human-only: %s %v", text, data)
	}
	// A failure is a tool error too.
	res, text = callTool(t, s, "records.get", map[string]any{"collection": "c", "key": "missing", "rationale": "read the record"})
	if !res.IsError || !strings.Contains(text, "No record") {
		t.Errorf("failed call: %s", text)
	}
	// The same key and call again: the first outcome, run once.
	args := map[string]any{"collection": "c", "key": "k", "text": "hi", "rationale": "note the call outcome", "idempotency_key": "note-k-000000000001"}
	first, t1 := callTool(t, s, "notes.append", args)
	second, t2 := callTool(t, s, "notes.append", args)
	if first.IsError || second.IsError || structured(t, first)["proposal_id"] != structured(t, second)["proposal_id"] {
		t.Errorf("idempotent retry: %s / %s", t1, t2)
	}
}

func TestMCP_TokenAndBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	e.user("other@example.com", auth.RoleMember)
	owner := e.token("owner@example.com", auth.TokenUser)
	intruder := e.token("other@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", owner, map[string]any{"title": "Mine"})
	_, nb := e.api("POST", "/api/v1/notebooks", owner, map[string]any{"title": "Mine"})

	if _, err := e.mcpConnect("", "x", "", nil); err == nil {
		t.Fatal("connected without a token")
	}
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bad token: %v %v", resp, err)
	}
	for name, bind := range map[string]struct {
		query  string
		header map[string]string
	}{
		"conversation header": {"", map[string]string{"Gatehouse-Conversation": conv["id"].(string)}},
		"notebook header":     {"", map[string]string{"Gatehouse-Notebook": nb["id"].(string)}},
		"conversation query":  {"?conversation=" + conv["id"].(string), nil},
		"notebook query":      {"?notebook=" + nb["id"].(string), nil},
	} {
		if _, err := e.mcpConnect(intruder, "x", bind.query, bind.header); err == nil {
			t.Errorf("%s: another user's agent bound to the owner's scope", name)
		}
	}
	// The owner's own notebook binds: a read runs as a cell there.
	agent := e.token("owner@example.com", auth.TokenAgent)
	s, err := e.mcpConnect(agent, "x", "?notebook="+nb["id"].(string), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res, text := callTool(t, s, "records.search", map[string]any{"query": "q", "rationale": "look for the record"}); res.IsError {
		t.Fatal(text)
	}
	if _, cells := e.api("GET", "/api/v1/notebooks/"+nb["id"].(string)+"/cells", owner, nil); len(cells["cells"].([]any)) != 1 {
		t.Fatalf("cells: %v", cells)
	}
	// Another token cannot use the session's id.
	hijack, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
	hijack.Header.Set("Content-Type", "application/json")
	hijack.Header.Set("Accept", "application/json, text/event-stream")
	hijack.Header.Set("Authorization", "Bearer "+intruder)
	hijack.Header.Set("Mcp-Session-Id", s.ID())
	if resp, err := http.DefaultClient.Do(hijack); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another token on the session: %v %v", resp, err)
	}
}

func TestToolCheatsheet_MarkdownWithAnETagOverRESTAndMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	resp, _ := e.api("GET", "/api/v1/tools/records.put/cheatsheet", agent, nil)
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") || etag == "" ||
		resp.Header.Get("Cache-Control") != "private, max-age=3600" {
		t.Fatalf("cheatsheet: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ := http.NewRequest("GET", e.url+"/api/v1/tools/records.put/cheatsheet", nil)
	req.Header.Set("Authorization", "Bearer "+agent)
	req.Header.Set("If-None-Match", etag)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %v %v", resp, err)
	}
	if resp, _ := e.api("GET", "/api/v1/tools/nope.nope/cheatsheet", agent, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown tool: %d", resp.StatusCode)
	}
	_, list := e.api("GET", "/api/v1/tools", agent, nil)
	found := false
	for _, tool := range list["tools"].([]any) {
		if m := tool.(map[string]any); m["name"] == "records.put" && m["cheatsheet_url"] == "/api/v1/tools/records.put/cheatsheet" {
			found = true
		}
	}
	if !found {
		t.Error("GET /api/v1/tools does not point at the cheatsheet")
	}

	s := e.mustMCP(agent, "claude-code", nil)
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "records.put" && !strings.HasPrefix(tool.Description, "Before any write or non-trivial query, fetch gatehouse://tools/records.put/cheatsheet first. Do NOT guess property names or association types.") {
			t.Errorf("description: %s", tool.Description)
		}
	}
	rr, err := s.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "gatehouse://tools/records.put/cheatsheet"})
	if err != nil || rr.Contents[0].MIMEType != "text/markdown" || !strings.Contains(rr.Contents[0].Text, "# records.put") {
		t.Fatalf("resource: %v %v", rr, err)
	}
	// The same ETag and lifetime over MCP, in _meta.
	if m := rr.Contents[0].Meta; m["gatehouse/etag"] != etag || m["gatehouse/max_age_seconds"] != float64(3600) {
		t.Errorf("resource _meta: %v, want etag %s and max age 3600", m, etag)
	}
}
