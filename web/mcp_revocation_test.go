package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// What ends an MCP session's calls, now that the gateway answers most of
// them itself (direct.go): a revoked token, a closed session and another
// token are refused at the next call, on the instance that saw it at once
// and on every other one within the bound docs/mcp.md states.

// at is the session m as a client behind a balancer reaches it on
// another instance.
func (m *mcpRaw) at(base string) *mcpRaw {
	c := *m
	c.url = base
	return &c
}

// end ends the session (DELETE /mcp).
func (m *mcpRaw) end(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, m.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Mcp-Session-Id", m.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /mcp: %d", resp.StatusCode)
	}
}

// status posts a tools/call of records.search in the session and returns
// the HTTP status.
func (m *mcpRaw) status(t *testing.T) int {
	t.Helper()
	resp, _ := m.post(t, m.callBody("records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"}), nil)
	return resp.StatusCode
}

// proposalsMade counts the calls recorded.
func proposalsMade(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// within polls f until it holds, failing the test after d.
func within(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !f(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// A revoked token's next call is refused (401) at once on the instance
// that revoked it, and on another instance that holds its session as soon
// as the revocation's notification arrives (auth.TokenCacheTTL, 1 s,
// bounds it should the notification be lost; here the other instance
// believes tokens for a minute, so only the notification can stop it).
// Nothing is recorded after the refusal.
func TestMCP_ARevokedTokensNextCallIsRefusedOnEveryInstance(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	b.auth.SetTokenCacheTTL(time.Minute)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	m := openMCP(t, a.url, agent, nil)
	if m.status(t) != http.StatusOK || m.at(b.url).status(t) != http.StatusOK {
		t.Fatal("the session's calls do not work on both instances")
	}
	if a.srv.MCPDirectCallCount() != 1 || b.srv.MCPDirectCallCount() != 1 {
		t.Fatalf("direct calls: a %d, b %d; want one each", a.srv.MCPDirectCallCount(), b.srv.MCPDirectCallCount())
	}
	var id uuid.UUID
	if err := a.pool.QueryRow(t.Context(), `SELECT id FROM api_tokens WHERE kind = 'agent'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := a.auth.RevokeToken(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	made := proposalsMade(t, a)
	if got := m.status(t); got != http.StatusUnauthorized {
		t.Fatalf("the revoking instance: %d after the revocation", got)
	}
	within(t, 5*time.Second, "the other instance to refuse the revoked token", func() bool {
		resp, _ := m.at(b.url).post(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
		return resp.StatusCode == http.StatusUnauthorized
	})
	if got := m.at(b.url).status(t); got != http.StatusUnauthorized {
		t.Fatalf("the other instance: %d after the revocation", got)
	}
	if proposalsMade(t, a) != made {
		t.Fatal("a call was recorded after the revocation")
	}
}

// A session ended by its client (DELETE) refuses its next call (404) at
// once on the instance that ended it, and on another instance that took
// it up as soon as the notification arrives. Nothing is recorded.
func TestMCP_AClosedSessionsNextCallIsRefusedOnEveryInstance(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	m := openMCP(t, a.url, agent, nil)
	if m.status(t) != http.StatusOK || m.at(b.url).status(t) != http.StatusOK {
		t.Fatal("the session's calls do not work on both instances")
	}
	m.end(t)
	made := proposalsMade(t, a)
	if got := m.status(t); got != http.StatusNotFound {
		t.Fatalf("the instance that ended the session: %d", got)
	}
	within(t, 5*time.Second, "the other instance to let the session go", func() bool { return b.srv.MCPLiveSessions() == 0 })
	if got := m.at(b.url).status(t); got != http.StatusNotFound {
		t.Fatalf("the other instance: %d after the session ended", got)
	}
	if proposalsMade(t, a) != made {
		t.Fatal("a call was recorded in the ended session")
	}
}

// An instance that missed a session's end (its notification lost, say
// while its listener reconnected) learns it when it next writes the
// session's seen_at: within a minute of use, or half the session timeout
// when that is shorter. Here the timeout is 2 s: 1 s.
func TestMCP_AnInstanceThatMissedASessionsEndLetsItGoWithinTheTouchInterval(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.srv.MCPSessionTimeout(2 * time.Second)
	b.srv.MCPSessionTimeout(2 * time.Second)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	m := openMCP(t, a.url, agent, nil)
	if m.at(b.url).status(t) != http.StatusOK {
		t.Fatal("the other instance does not take the session up")
	}
	// Ended without a notification: only the row says so.
	if _, err := a.pool.Exec(t.Context(), `UPDATE mcp_sessions SET closed_at = now() WHERE id = $1`, m.session); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	made := proposalsMade(t, a)
	if got := m.at(b.url).status(t); got != http.StatusNotFound {
		t.Fatalf("the instance that missed the end: %d", got)
	}
	if proposalsMade(t, a) != made {
		t.Fatal("the session's call was recorded")
	}
	// The copy goes once the SDK's session has closed, which may be just
	// after it answered.
	within(t, 5*time.Second, "the instance that missed the end to let its copy go", func() bool { return b.srv.MCPLiveSessions() == 0 })
}

// Only the token that opened a session calls in it: another token, of
// another user or of the same one, is refused on the instance that holds
// the session (403) and on one that does not (404, nothing is taken up),
// and nothing is recorded or answered directly.
func TestMCP_AnotherTokenCannotCallInTheSession(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	a.user("other@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	m := openMCP(t, a.url, agent, nil)
	if m.status(t) != http.StatusOK {
		t.Fatal("the session's own call does not work")
	}
	made, direct := proposalsMade(t, a), a.srv.MCPDirectCallCount()
	for _, token := range []string{a.token("other@example.com", auth.TokenAgent), a.token("owner@example.com", auth.TokenAgent)} {
		thief := *m
		thief.token = token
		if got := thief.status(t); got != http.StatusForbidden {
			t.Errorf("another token on the holding instance: %d", got)
		}
		if got := thief.at(b.url).status(t); got != http.StatusNotFound {
			t.Errorf("another token on another instance: %d", got)
		}
	}
	if proposalsMade(t, a) != made || a.srv.MCPDirectCallCount() != direct || b.srv.MCPLiveSessions() != 0 {
		t.Fatal("another token's call was made, answered directly, or took the session up")
	}
}

// A tools/call in a session this instance holds, which it would answer
// directly, is refused (403) when a browser page of a foreign origin sends
// it, before anything runs; the session's own client goes on.
func TestMCP_AForeignOriginsCallInAHeldSessionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	m := openMCP(t, e.url, agent, nil)
	if m.status(t) != http.StatusOK {
		t.Fatal("the session's own call does not work")
	}
	made, direct := proposalsMade(t, e), e.srv.MCPDirectCallCount()
	resp, body := m.post(t, m.callBody("records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"}),
		http.Header{"Origin": {"http://evil.example"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "may not call this MCP endpoint") {
		t.Fatalf("a foreign origin's call: %d %s", resp.StatusCode, body)
	}
	if proposalsMade(t, e) != made || e.srv.MCPDirectCallCount() != direct {
		t.Fatal("a foreign origin's call ran")
	}
}
