//go:build node

package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The official MCP clients of other languages and the MCP conformance
// suite, against a real Gatehouse. They run on the Node.js that npm
// installs into testdata/node (the `node` package, Node 22: the suite
// needs it), after `npm ci` there: `make mcp-clients` does both.

// nodeRun runs the installed Node.js on args in testdata/node and returns
// its standard output.
func nodeRun(t *testing.T, args ...string) []byte {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Node.js in %s: run `make mcp-clients` (npm ci there first): %v", dir, err)
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("node %s: stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, stderr.String())
		t.Fatalf("node %s: %v", args[0], err)
	}
	return out
}

// The TypeScript SDK's client through a round-robin balancer over two
// instances: it connects, lists, calls and ends its session as on one
// instance (before, it failed to connect), and its calls land in one
// conversation.
func TestNode_TSClientOnTwoInstancesBehindARoundRobinBalancer(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	balancer := newRoundRobin(t, a.url, b.url)

	var got struct {
		SessionID string `json:"sessionId"`
		Tools     int    `json:"tools"`
		Results   []struct {
			IsError bool   `json:"isError"`
			Status  string `json:"status"`
		} `json:"results"`
		Error string `json:"error"`
	}
	out := nodeRun(t, "client.mjs", balancer+"/mcp", agent, "4")
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output: %v: %s", err, out)
	}
	if got.Error != "" || got.Tools == 0 || len(got.Results) != 4 {
		t.Fatalf("TS client: %+v", got)
	}
	for i, r := range got.Results {
		if r.IsError || r.Status != "applied" {
			t.Errorf("call %d: %+v", i, r)
		}
	}
	var calls, convs int
	var closed bool
	if err := a.pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT p.conversation_id), bool_and(m.closed_at IS NOT NULL)
		FROM proposals p JOIN mcp_sessions m ON m.conversation_id = p.conversation_id WHERE m.id = $1`, got.SessionID).Scan(&calls, &convs, &closed); err != nil {
		t.Fatal(err)
	}
	if calls != 4 || convs != 1 || !closed {
		t.Fatalf("calls %d in %d conversations, session closed %v; want 4 in 1, closed", calls, convs, closed)
	}
}

// withToken is a proxy in front of an instance that adds a bearer token
// to every request (the conformance suite sends none).
func withToken(t *testing.T, base, token string) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.FlushInterval = -1
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// The MCP conformance suite's server scenarios against /mcp (its active
// suite, revision 2025-11-25): every scenario passes but those listed in
// testdata/node/conformance-expected.yaml, which call the suite's own
// fixtures; the suite fails the run on any other failure and on a listed
// scenario that passes.
func TestNode_ConformanceSuite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	dir := os.Getenv("CONFORMANCE_OUT") // to read the checks of each scenario after the run
	if dir == "" {
		dir = t.TempDir()
	}
	out := nodeRun(t, "node_modules/.bin/conformance", "server", "--url", withToken(t, e.url, agent)+"/mcp", "-o", dir,
		"--expected-failures", "conformance-expected.yaml")
	if !strings.Contains(string(out), "Baseline check passed") {
		t.Fatalf("the suite's baseline check did not pass:\n%s", out)
	}
}
