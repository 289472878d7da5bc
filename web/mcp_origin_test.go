package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// newEnvOrigins is a server that lets the browser origins listed call /mcp.
func newEnvOrigins(t *testing.T, origins ...string) *env {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return newEnvConfig(t, dbtest.MustPool(t), registry, web.Config{CookieSecure: true, MCPAllowedOrigins: origins})
}

// mcpRequest sends one raw request to /mcp with the headers given ("Host"
// sets the Host the server sees) and returns the status and body.
func (e *env) mcpRequest(method, body string, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp, string(b)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`

func TestMCP_AForeignOriginIsRefusedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	e := newEnvOrigins(t, "https://inspector.example")
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	host := strings.TrimPrefix(e.url, "http://")
	_, port, _ := strings.Cut(host, ":")

	for name, c := range map[string]struct {
		method string
		header map[string]string
	}{
		"a cross-site page, with the token":    {"POST", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + agent}},
		"a cross-site page, without a token":   {"POST", map[string]string{"Origin": "http://evil.example"}},
		"a rebound name (Host matches Origin)": {"POST", map[string]string{"Origin": "http://evil.example:" + port, "Host": "evil.example:" + port, "Authorization": "Bearer " + agent}},
		"an opaque origin":                     {"POST", map[string]string{"Origin": "null", "Authorization": "Bearer " + agent}},
		"another port of localhost":            {"POST", map[string]string{"Origin": "http://localhost:1", "Authorization": "Bearer " + agent}},
		"the listed origin over http":          {"POST", map[string]string{"Origin": "http://inspector.example", "Authorization": "Bearer " + agent}},
		"the stream (GET)":                     {"GET", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + agent}},
		"closing a session (DELETE)":           {"DELETE", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + agent, "Mcp-Session-Id": "x"}},
	} {
		body := ""
		if c.method == "POST" {
			body = initialize
		}
		resp, got := e.mcpRequest(c.method, body, c.header)
		var rpc struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusForbidden || json.Unmarshal([]byte(got), &rpc) != nil || rpc.JSONRPC != "2.0" || string(rpc.ID) != "null" ||
			rpc.Error.Code != -32600 || !strings.Contains(rpc.Error.Message, "Origin") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, got)
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a session was opened", name)
		}
	}
	// Nothing ran: no session made a conversation.
	if _, list := e.api("GET", "/api/v1/conversations", user, nil); len(list["conversations"].([]any)) != 0 {
		t.Fatalf("a refused request made a conversation: %v", list)
	}

	// An open session's requests are checked too.
	s := e.mustMCP(agent, "claude-code", nil)
	resp, got := e.mcpRequest("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
		map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + agent, "Mcp-Session-Id": s.ID(), "Mcp-Protocol-Version": "2025-11-25"})
	if resp.StatusCode != http.StatusForbidden || strings.Contains(got, "records.search") {
		t.Fatalf("a foreign origin on an open session: %d %s", resp.StatusCode, got)
	}
}

func TestMCP_NoOriginItsOwnLoopbackOriginOrAListedOneGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnvOrigins(t, "https://inspector.example")
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	u, _ := url.Parse(e.url)
	localhost := "http://localhost:" + u.Port()
	for name, c := range map[string]struct{ endpoint, origin string }{
		"no Origin (not a browser)":     {e.url, ""},
		"its own loopback origin":       {e.url, e.url},
		"its own origin as localhost":   {localhost, localhost},
		"a listed origin":               {e.url, "https://inspector.example"},
		"a listed origin, spelled else": {e.url, "HTTPS://Inspector.Example:443"},
	} {
		h := http.Header{"Authorization": {"Bearer " + agent}}
		if c.origin != "" {
			h.Set("Origin", c.origin)
		}
		transport := &sdk.StreamableClientTransport{Endpoint: c.endpoint + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: mcpHeaders{header: h, base: http.DefaultTransport}, Timeout: 30 * time.Second}}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s, err := sdk.NewClient(&sdk.Implementation{Name: "inspector", Version: "1"}, nil).Connect(ctx, transport, nil)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if res, text := callTool(t, s, "records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"}); res.IsError {
			t.Errorf("%s: %s", name, text)
		}
		s.Close()
	}
	// A listed origin still needs the token: 401, not a way around it.
	if resp, _ := e.mcpRequest("POST", initialize, map[string]string{"Origin": "https://inspector.example"}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a listed origin without a token: %d", resp.StatusCode)
	}
}
