package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/policyfile"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// reloadEnv is a server built as serve builds it, on a policy file it can
// reload (policyfile.Loader).
type reloadEnv struct {
	*env
	registry *tools.Registry
	loader   *policyfile.Loader
	path     string
}

func newReloadEnv(t *testing.T, policyText string) *reloadEnv {
	t.Helper()
	pool := dbtest.MustPool(t)
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	file, data, err := policyfile.Read(path, registry, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.ReplacePolicy(file, nil); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc := web.NewServices(pool, log, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry)
	ws, err := svc.Auth.EnsureDefaultWorkspace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ups, err := mcp.NewUpstreams(pool, registry, file, ws, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ups.Close)
	ups.Refresh(context.Background())
	svc.Upstreams = ups
	if err := svc.Settings.ApplyFile(context.Background(), file.Settings); err != nil {
		t.Fatal(err)
	}
	loader := policyfile.New(policyfile.Config{Path: path, Getenv: getenv, Registry: registry, Upstreams: ups, Settings: svc.Settings, Pool: pool, Log: log}, file, data)
	svc.Policy = loader
	srv, err := web.New(web.Config{CookieSecure: true}, log, pool, svc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &reloadEnv{env: &env{t: t, url: hs.URL, pool: pool, auth: svc.Auth, ws: ws.String(), srv: srv}, registry: registry, loader: loader, path: path}
}

// reload writes the file and reloads it, as SIGHUP does.
func (r *reloadEnv) reload(text string) error {
	r.t.Helper()
	if err := os.WriteFile(r.path, []byte(text), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return r.loader.Reload(context.Background(), "test")
}

const reloadUpstream = `
upstreams:
  - name: files
    url: %s
    timeout: 2s
    accept: [read_file, stamp, greet]
    tools:
      stamp: {effect: %s}
`

// TestPolicyReload_UpstreamsChangeWithTheRegistry: an upstream whose
// override changed has its tools declared anew in the reload's one swap
// (and is listed again over a new session); an added upstream's tools
// join when it is listed; a removed upstream's tools leave with the swap.
// A bad file changes nothing.
func TestPolicyReload_UpstreamsChangeWithTheRegistry(t *testing.T) {
	t.Parallel()
	// Both upstreams before the server: they stop after it (cleanups run
	// last first), since an open session holds their connections.
	files, more := newFakeUpstream(t), newFakeUpstream(t)
	r := newReloadEnv(t, fmt.Sprintf(reloadUpstream, files.url, "read"))
	r.user("owner@example.com", auth.RoleMember)
	s := r.mustMCP(r.token("owner@example.com", auth.TokenAgent), "claude-code", nil)
	if res, text := callTool(t, s, "files.stamp", map[string]any{"rationale": "stamp the file as asked"}); res.IsError || text != "stamped" {
		t.Fatalf("stamp as a read: %s", text)
	}
	before := r.registry.Hash()

	// Changed: stamp is a write now, from the swap on, before any listing.
	if err := r.reload(fmt.Sprintf(reloadUpstream, files.url, "mutate")); err != nil {
		t.Fatal(err)
	}
	if st, ok := r.registry.Get("files.stamp"); !ok || st.Effect != policy.EffectMutate {
		t.Fatalf("files.stamp after the reload: %+v %v", st, ok)
	}
	if r.registry.Hash() == before {
		t.Fatal("the registry's hash did not change")
	}
	if res, text := callTool(t, s, "files.stamp", map[string]any{"rationale": "stamp the file again", "idempotency_key": "stamp-again-000000001"}); res.IsError || structured(t, res)["status"] != "pending" {
		t.Fatalf("stamp as a write waits for its owner: %s", text)
	}
	// The replaced upstream's new session forwards.
	if res, text := callTool(t, s, "files.read_file", map[string]any{"path": "b.txt", "rationale": "read the file the owner named"}); res.IsError || text != "contents of b.txt" {
		t.Fatalf("read_file after the reload: %s", text)
	}

	// A bad file (an upstream named like a built-in tool) changes nothing.
	bad := fmt.Sprintf(reloadUpstream, files.url, "read") + "  - name: records\n    url: http://127.0.0.1:9/mcp\n"
	err := r.reload(bad)
	if err == nil || !strings.Contains(err.Error(), "line 9") || r.loader.Status().Error == nil {
		t.Fatalf("a bad file: %v", err)
	}
	if st, _ := r.registry.Get("files.stamp"); st.Effect != policy.EffectMutate {
		t.Fatal("a bad file changed the registry")
	}

	// Added: another upstream's tools join once it is listed.
	added := fmt.Sprintf(reloadUpstream, files.url, "mutate") + "  - name: more\n    url: " + more.url + "\n    accept: [greet]\n"
	if err := r.reload(added); err != nil {
		t.Fatal(err)
	}
	if r.loader.Status().Error != nil {
		t.Fatal("a good file left the last error shown")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := r.registry.Get("more.greet"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the added upstream's tools never joined")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res, text := callTool(t, s, "more.greet", map[string]any{"rationale": "say hello to the owner"}); res.IsError || text != "hello" {
		t.Fatalf("more.greet: %s", text)
	}

	// Removed: its tools leave with the swap.
	if err := r.reload("upstreams:\n  - name: more\n    url: " + more.url + "\n    accept: [greet]\n"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.registry.Get("files.read_file"); ok {
		t.Fatal("a removed upstream's tool is still declared")
	}
	if _, ok := r.registry.Get("more.greet"); !ok {
		t.Fatal("the unchanged upstream lost its tools")
	}
	res, err := s.CallTool(t.Context(), &sdk.CallToolParams{Name: "files.read_file", Arguments: map[string]any{"path": "c.txt", "rationale": "read the file the owner named"}})
	if err == nil && !res.IsError {
		t.Fatal("a removed upstream's tool ran")
	}
	if n := files.calls["read_file"].Load(); n != 1 {
		t.Fatalf("the upstream got %d read_file calls, want 1", n)
	}
}

// Two files for records.put: B raises its risk and gates it above an
// amount, two facts that land in separate fields of one decision's inputs.
const (
	loadLimits = "    rate_limits: {per_agent_per_minute: 10000, per_workspace_per_hour: 100000, per_workspace_per_day: 100000}\n"
	loadFileA  = "tools:\n  records.put:\n" + loadLimits
	loadFileB  = loadFileA + "    risk: high\n    threshold: \"value.amount > 100\"\n    class_rationale: Invoices above 100 are read by an approver first.\n"
)

// TestPolicyReload_UnderLoadNoCallIsLostOrDecidedUnderTwoFiles: calls go
// on while the file switches back and forth; every call is answered and
// recorded, and each was decided wholly under one file (its recorded
// inputs have B's risk exactly when they have B's threshold).
func TestPolicyReload_UnderLoadNoCallIsLostOrDecidedUnderTwoFiles(t *testing.T) {
	t.Parallel()
	r := newReloadEnv(t, loadFileA)
	r.user("owner@example.com", auth.RoleMember)
	token := r.token("owner@example.com", auth.TokenUser)
	_, conv := r.api("POST", "/api/v1/conversations", token, map[string]any{"title": "Load"})
	id := conv["id"].(string)
	if resp, out := r.api("PATCH", "/api/v1/conversations/"+id, token, map[string]any{"permission_mode": "auto"}); resp.StatusCode != 200 {
		t.Fatalf("auto mode: %d %v", resp.StatusCode, out)
	}
	const workers, each = 4, 25
	statuses := make(chan int, workers*each)
	done := make(chan struct{})
	for w := range workers {
		go func() {
			for i := range each {
				body := fmt.Sprintf(`{"tool":"records.put","rationale":"record the invoice the customer sent","arguments":{"collection":"inv","key":"k-%d-%d","value":{"amount":500}}}`, w, i)
				req, _ := http.NewRequest("POST", r.url+"/api/v1/conversations/"+id+"/tool-calls", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses <- 0
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses <- resp.StatusCode
			}
		}()
	}
	var reloading time.Duration
	go func() {
		defer close(done)
		for i := range 12 {
			text := loadFileA
			if i%2 == 0 {
				text = loadFileB
			}
			start := time.Now()
			if err := r.reload(text); err != nil {
				t.Errorf("reload %d: %v", i, err)
			}
			reloading += time.Since(start)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	counts := map[int]int{}
	for range workers * each {
		counts[<-statuses]++
	}
	<-done
	if counts[200]+counts[202] != workers*each {
		t.Fatalf("answers by status: %v", counts)
	}
	rows, err := r.pool.Query(t.Context(), `SELECT decision_input->>'risk', (decision_input->>'threshold_exceeded')::boolean, state FROM proposals WHERE tool = 'records.put' AND workspace_id = $1`, r.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, underB := 0, 0
	for rows.Next() {
		var risk, state string
		var over bool
		if err := rows.Scan(&risk, &over, &state); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case risk == "high" && over && state == "deferred":
			underB++
		case risk == "medium" && !over && state == "allowed":
		default:
			t.Errorf("a call decided under two files: risk %s, threshold exceeded %v, %s", risk, over, state)
		}
	}
	if n != workers*each || underB != counts[202] {
		t.Fatalf("%d calls recorded (%d under B) of %d answered %v", n, underB, workers*each, counts)
	}
	t.Logf("%d calls during 12 reloads (%s each on average, settings written included): %v", n, reloading/12, counts)
}
