package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// Bad input to /mcp gets the Streamable HTTP transport's errors and writes
// nothing: a body that is not JSON or not JSON-RPC, 400; a session id
// this server never gave, 404 (the client starts a new session); a body
// over the 1 MiB limit, 413. No conversation, call or audit row is left.
func TestMCP_BadInputGetsTheTransportsErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	s := e.mustMCP(agent, "claude-code", nil)
	var audited int
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_events`).Scan(&audited)

	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.put","arguments":{"collection":"c","key":"k","value":{},"rationale":"store the owner's note"}}}`
	for name, c := range map[string]struct {
		body, session string
		status        int
	}{
		"not JSON":                 {`{"jsonrpc":"2.0","id":1,"method":`, "", http.StatusBadRequest},
		"not JSON, in a session":   {`{"jsonrpc":"2.0","id":1,"method":`, s.ID(), http.StatusBadRequest},
		"not JSON-RPC":             {`{"hello":"world"}`, "", http.StatusBadRequest},
		"a session never given":    {call, "0123456789abcdef", http.StatusNotFound},
		"over 1 MiB, in a session": {strings.Replace(call, `"k"`, `"`+strings.Repeat("k", 2<<20)+`"`, 1), s.ID(), http.StatusRequestEntityTooLarge},
	} {
		req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+agent)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if c.session != "" {
			req.Header.Set("Mcp-Session-Id", c.session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.status)
		}
	}
	var convs, calls, after int
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM conversations`).Scan(&convs)
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals`).Scan(&calls)
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_events`).Scan(&after)
	if convs != 0 || calls != 0 || after != audited {
		t.Errorf("bad input left %d conversations, %d calls and %d audit rows", convs, calls, after-audited)
	}
	// The session still works.
	if res, text := callTool(t, s, "records.search", map[string]any{"query": "x", "rationale": "look for the owner's note"}); res.IsError {
		t.Errorf("the session after bad input: %s", text)
	}
}
