package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// roundRobin is a balancer without stickiness in front of instances: each
// request goes to the next one, whatever its session. It counts the
// requests each instance received.
type roundRobin struct {
	proxies []*httputil.ReverseProxy
	next    atomic.Int64
	served  []atomic.Int64
}

func newRoundRobin(t *testing.T, urls ...string) string {
	t.Helper()
	rr := &roundRobin{served: make([]atomic.Int64, len(urls))}
	for _, u := range urls {
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		p := httputil.NewSingleHostReverseProxy(target)
		p.FlushInterval = -1 // event streams pass at once
		rr.proxies = append(rr.proxies, p)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(rr.next.Add(1)-1) % len(rr.proxies)
		rr.served[i].Add(1)
		rr.proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// twoInstances are two servers on one database, each with its own pool
// (so its own LISTEN connection and its own memory).
func twoInstances(t *testing.T) (*env, *env) {
	t.Helper()
	dsn := dbtest.MustURL(t)
	instance := func() *env {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return newEnvOn(t, pool)
	}
	return instance(), instance()
}

// mcpAt connects the SDK's client to the /mcp of base with token, in a
// 2025-11-25 session.
func mcpAt(t *testing.T, base, token, client string) *sdk.ClientSession {
	t.Helper()
	return connectAt(t, base, token, client, nil, legacy)
}

// connectAt connects the SDK's client, with opts, to the /mcp of base
// with token (sopts: nil speaks the SDK's default revision, 2026-07-28).
func connectAt(t *testing.T, base, token, client string, opts *sdk.ClientOptions, sopts *sdk.ClientSessionOptions) *sdk.ClientSession {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}}
	transport := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: mcpHeaders{header: h, base: http.DefaultTransport}, Timeout: 30 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: client, Version: "1.0"}, opts).Connect(ctx, transport, sopts)
	if err != nil {
		t.Fatalf("connect over MCP through %s: %v", base, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawMCP posts one JSON-RPC message to an instance's /mcp in session id.
func rawMCP(t *testing.T, base, token, id, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Behind a round-robin balancer over two instances, one MCP session
// works: its initialize reaches one instance and every later request the
// other one in turn; each instance takes the session up from its row and
// serves it, and the calls all land in the one conversation the session
// planned, created once. Before, every request that reached the other
// instance got "session not found". Another token cannot use the
// session's id on either instance, and once the client ends the session,
// neither instance serves it.
func TestMCP_OneSessionWorksOnTwoInstancesBehindARoundRobinBalancer(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	a.user("other@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	other := a.token("other@example.com", auth.TokenAgent)
	balancer := newRoundRobin(t, a.url, b.url)

	s := mcpAt(t, balancer, agent, "claude-code")
	id := s.ID()
	if len(id) < 16 {
		t.Fatalf("session id %q", id)
	}
	for i := range 3 {
		if _, err := s.ListTools(t.Context(), nil); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	for i, q := range []string{"acme", "beta", "gamma", "delta"} {
		if res, text := callTool(t, s, "records.search", map[string]any{"query": q, "rationale": "find the customer's record"}); res.IsError {
			t.Fatalf("call %d: %s", i, text)
		}
	}
	if a.srv.MCPLiveSessions() != 1 || b.srv.MCPLiveSessions() != 1 {
		t.Fatalf("sessions held: a %d, b %d; want the one session on both", a.srv.MCPLiveSessions(), b.srv.MCPLiveSessions())
	}
	var convs, created, calls int
	if err := a.pool.QueryRow(t.Context(), `SELECT count(*) FROM conversations WHERE title = 'MCP: claude-code'`).Scan(&convs); err != nil {
		t.Fatal(err)
	}
	if err := a.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE action = 'conversation.created'`).Scan(&created); err != nil {
		t.Fatal(err)
	}
	if err := a.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals p JOIN mcp_sessions m ON m.conversation_id = p.conversation_id
		WHERE m.id = $1 AND p.tool = 'records.search'`, id).Scan(&calls); err != nil {
		t.Fatal(err)
	}
	if convs != 1 || created != 1 || calls != 4 {
		t.Fatalf("conversations %d (created %d), calls in the session's %d; want 1, 1, 4", convs, created, calls)
	}

	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for name, inst := range map[string]*env{"a": a, "b": b} {
		if resp := rawMCP(t, inst.url, other, id, ping); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusForbidden {
			t.Errorf("instance %s served another token's request in the session: %d", name, resp.StatusCode)
		}
		if resp := rawMCP(t, inst.url, agent, id, ping); resp.StatusCode != http.StatusOK {
			t.Errorf("instance %s: the session's own ping: %d", name, resp.StatusCode)
		}
	}

	if err := s.Close(); err != nil { // DELETE, through the balancer
		t.Fatal(err)
	}
	for name, inst := range map[string]*env{"a": a, "b": b} {
		waitFor(t, "instance "+name+" to let the session go", func() bool { return inst.srv.MCPLiveSessions() == 0 })
		if resp := rawMCP(t, inst.url, agent, id, ping); resp.StatusCode != http.StatusNotFound {
			t.Errorf("instance %s serves the session after its client ended it: %d", name, resp.StatusCode)
		}
	}
}

// An unknown session id is not found on any instance, and takes nothing
// up.
func TestMCP_AnUnknownSessionIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	if resp := rawMCP(t, e.url, agent, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session: %d", resp.StatusCode)
	}
	if e.srv.MCPLiveSessions() != 0 {
		t.Fatal("an unknown session was taken up")
	}
}
