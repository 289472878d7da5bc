package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// What a tool call through /mcp costs beside the same call over REST
// (issue 26): round trips to PostgreSQL, rows written, and, in the
// benchmarks, time, CPU and allocations per call.

// served marks the context of every request the cost tests' server
// serves, so that the tracer tells a call's statements from the
// background workers' (sequencer, roll-ups, notifier).
type servedKey struct{}

// roundTripLog is a pgx tracer that counts the round trips (a query, or a
// batch, is one) sent under a served request's context, and keeps their
// statements, while on.
type roundTripLog struct {
	on  atomic.Bool
	n   atomic.Int64
	mu  sync.Mutex
	sql []string
}

func (l *roundTripLog) note(ctx context.Context, sql string, count bool) {
	if !l.on.Load() || ctx.Value(servedKey{}) == nil {
		return
	}
	if count {
		l.n.Add(1)
	}
	l.mu.Lock()
	l.sql = append(l.sql, strings.Join(strings.Fields(sql), " "))
	l.mu.Unlock()
}

func (l *roundTripLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.note(ctx, d.SQL, true)
	return ctx
}
func (l *roundTripLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *roundTripLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.note(ctx, "(batch)", true)
	return ctx
}
func (l *roundTripLog) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.note(ctx, "  "+d.SQL, false)
}
func (l *roundTripLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// start clears the log and counts from now.
func (l *roundTripLog) start() {
	l.mu.Lock()
	l.sql = nil
	l.mu.Unlock()
	l.n.Store(0)
	l.on.Store(true)
}

// stop stops counting and returns the round trips and statements since
// start.
func (l *roundTripLog) stop() (int64, string) {
	l.on.Store(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n.Load(), strings.Join(l.sql, "\n")
}

// costEnv is a server on its own database whose pool is traced, with the
// benchmark's upstream ("bench", its read tool "lookup", accepted and
// classified a read, as .ci/bench declares it), an agent token and an
// auto-mode conversation holding the record records.get reads.
type costEnv struct {
	url, agent, conv string
	upstream         string // the upstream's URL
	pool             *pgxpool.Pool
	log              *roundTripLog
	srv              *web.Server
}

const costPolicy = `
tools:
  records.get: {rate_limits: {per_agent_per_minute: 100000000}}
  records.put: {rate_limits: {per_agent_per_minute: 100000000}}
upstreams:
  - name: bench
    url: %s
    accept: [lookup]
    tools:
      lookup: {effect: read, authority: read, action_class: read.context, rate_limits: {per_agent_per_minute: 100000000}}
`

// benchUpstream serves the benchmark's upstream MCP server (as
// gatehouse-bench -serve-upstream does): lookup, a read that answers at
// once.
func benchUpstream(tb testing.TB) string {
	tb.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench-upstream", Version: "1.0"}, nil)
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(bool), OpenWorldHint: new(bool)}
	type in struct {
		Key string `json:"key"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "lookup", Description: "Look a key up.", Annotations: readOnly},
		func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "value of " + a.Key}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	tb.Cleanup(hs.Close)
	return hs.URL
}

func newCostEnv(tb testing.TB) *costEnv {
	tb.Helper()
	ctx := context.Background()
	log := &roundTripLog{}
	cfg, err := pgxpool.ParseConfig(dbtest.MustURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.Tracer = log
	// A connection the pool opens while a request is measured is its
	// set-up (JIT off: db.AfterConnect), not a round trip of the call.
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error { return db.AfterConnect(context.Background(), c) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	registry, err := tools.Builtin()
	if err != nil {
		tb.Fatal(err)
	}
	upstream := benchUpstream(tb)
	file, err := tools.ParsePolicyFile([]byte(fmt.Sprintf(costPolicy, upstream)), registry.Classes(), func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	if err := tools.ApplyOverrides(registry, file); err != nil {
		tb.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	svc := web.NewServices(pool, discard, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry)
	// The token is looked up once: what is counted is the call.
	svc.Auth.SetTokenCacheTTL(time.Hour)
	ws, err := svc.Auth.EnsureDefaultWorkspace(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	ups, err := mcp.NewUpstreams(pool, registry, file, ws, discard, "test")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ups.Close)
	ups.Refresh(ctx)
	svc.Upstreams = ups
	srv, err := web.New(web.Config{ReceiptKey: testReceiptKey}, discard, pool, svc)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), servedKey{}, true)))
	}))
	tb.Cleanup(func() { hs.Close(); srv.Close() })
	if _, err := svc.Auth.CreateUser(ctx, ws, "owner@example.com", password, auth.RoleMember); err != nil {
		tb.Fatal(err)
	}
	agent, err := svc.Auth.CreateToken(ctx, "owner@example.com", auth.TokenAgent, "bench agent")
	if err != nil {
		tb.Fatal(err)
	}
	user, err := svc.Auth.CreateToken(ctx, "owner@example.com", auth.TokenUser, "bench user")
	if err != nil {
		tb.Fatal(err)
	}
	e := &costEnv{url: hs.URL, agent: agent, pool: pool, log: log, srv: srv, upstream: upstream}
	var conv struct {
		ID string `json:"id"`
	}
	e.rest(tb, http.MethodPost, "/api/v1/conversations", agent, `{"title":"bench"}`, &conv)
	e.conv = conv.ID
	e.rest(tb, http.MethodPatch, "/api/v1/conversations/"+e.conv, user, `{"permission_mode":"auto"}`, nil)
	e.restCall(tb, "records.put", map[string]any{"collection": "lookup", "key": "client-01", "value": map[string]any{"n": 1}}, "seed the record the reads read")
	return e
}

// rest sends one API request and decodes its answer into out (if not
// nil); anything but a 2xx fails the test.
func (e *costEnv) rest(tb testing.TB, method, path, token, body string, out any) {
	tb.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		tb.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatal(err)
		}
	}
}

// restCall proposes a call over REST in the conversation (POST
// /api/v1/conversations/{id}/tool-calls) and fails on anything but 200.
func (e *costEnv) restCall(tb testing.TB, tool string, args map[string]any, rationale string) {
	tb.Helper()
	body, _ := json.Marshal(map[string]any{"tool": tool, "arguments": args, "rationale": rationale})
	e.rest(tb, http.MethodPost, "/api/v1/conversations/"+e.conv+"/tool-calls", e.agent, string(body), nil)
}

// mcpRaw is a 2025-11-25 MCP session driven with plain HTTP requests, as
// the benchmark's clients (and most agents' SDKs) send them.
type mcpRaw struct {
	url, token, session string
	header              http.Header
	next                int
}

// openMCP opens a session: initialize, then notifications/initialized.
func openMCP(tb testing.TB, base, token string, header http.Header) *mcpRaw {
	tb.Helper()
	m := &mcpRaw{url: base, token: token, header: header}
	resp, body := m.post(tb, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1.0"}}}`, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		tb.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	m.session = resp.Header.Get("Mcp-Session-Id")
	if resp, body := m.post(tb, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		tb.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	m.next = 1
	return m
}

// post sends one body in the session (none before initialize), with
// extra headers; it returns the response and its body.
func (m *mcpRaw) post(tb testing.TB, body string, extra http.Header) (*http.Response, []byte) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, m.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for _, h := range []http.Header{m.header, extra} {
		for k, v := range h {
			req.Header[k] = v
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// callBody is a tools/call request with the session's next id.
func (m *mcpRaw) callBody(tool string, args map[string]any) string {
	m.next++
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, m.next, params)
}

// call posts one tools/call and fails on anything but a result that is
// not an error; it returns the JSON-RPC answer.
func (m *mcpRaw) call(tb testing.TB, tool string, args map[string]any) map[string]any {
	tb.Helper()
	resp, body := m.post(tb, m.callBody(tool, args), nil)
	answer := rpcAnswer(tb, resp, body)
	if resp.StatusCode != http.StatusOK || answer["error"] != nil || answer["result"].(map[string]any)["isError"] == true {
		tb.Fatalf("tools/call %s: %d %s", tool, resp.StatusCode, body)
	}
	return answer
}

// quickCall posts one tools/call and checks its answer as the benchmark's
// clients do, without decoding it (as restCall does not decode its
// answer): 200, and neither a JSON-RPC error nor a tool error.
func (m *mcpRaw) quickCall(tb testing.TB, tool string, args map[string]any) {
	tb.Helper()
	resp, body := m.post(tb, m.callBody(tool, args), nil)
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"isError":true`)) || bytes.Contains(body, []byte(`"error":{`)) {
		tb.Fatalf("tools/call %s: %d %s", tool, resp.StatusCode, body)
	}
}

// rpcAnswer is the JSON-RPC response in an answer to a POST: the body
// (application/json) or its last event's data (text/event-stream); nil
// when there is none.
func rpcAnswer(tb testing.TB, resp *http.Response, body []byte) map[string]any {
	tb.Helper()
	var data []byte
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		data = body
	case strings.HasPrefix(ct, "text/event-stream"):
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.HasPrefix(d, "{") {
				data = []byte(d)
			}
		}
	default:
		return nil
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		tb.Fatalf("the answer is not a JSON-RPC message: %v: %s", err, body)
	}
	return out
}

// tableRows counts the rows of tables in the test's database.
func tableRows(tb testing.TB, pool *pgxpool.Pool, tables ...string) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	for _, table := range tables {
		var n int64
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
			tb.Fatal(err)
		}
		out[table] = n
	}
	return out
}

const (
	getRationale    = "benchmark: read a client"
	lookupRationale = "benchmark: look a key up upstream"
)

// A records.get through /mcp costs PostgreSQL what the same call over REST
// costs, and no more: three round trips on the call's path, each
// needed, and the same rows. (1) BEGIN with the read of the scope's row
// the decision needs (the conversation's mode and environment, the
// workspace's settings), pipelined; (2) the tool's own read of the record;
// (3) the record of the call (the proposal, its two audit rows and its
// receipt, in one statement) with COMMIT, pipelined. The token was looked
// up once and is believed (auth.TokenCacheTTL, with revocations
// notified); the session is held by this instance, so nothing of it is
// read, and its seen_at is written at most once a minute. No row of
// mcp_sessions, conversations or anything else is written per call.
// The gateway answers such a call itself (direct.go); through the SDK it
// costs the same round trips.
func TestMCP_RecordsGetIsThreeRoundTripsAsOverREST(t *testing.T) {
	t.Parallel()
	e := newCostEnv(t)
	m := openMCP(t, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	restArgs := map[string]any{"collection": "lookup", "key": "client-01"}
	mcpArgs := map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}
	// The first calls prepare the statements (a round trip each).
	e.restCall(t, "records.get", restArgs, getRationale)
	m.call(t, "records.get", mcpArgs)
	const calls = 5
	tables := []string{"proposals", "audit_events", "receipts", "mcp_sessions", "conversations", "messages", "api_tokens"}
	for _, via := range []struct {
		name string
		sdk  bool
		call func()
	}{
		{"REST", false, func() { e.restCall(t, "records.get", restArgs, getRationale) }},
		{"MCP", false, func() { m.call(t, "records.get", mcpArgs) }},
		{"MCP through the SDK", true, func() { m.call(t, "records.get", mcpArgs) }},
	} {
		e.srv.MCPDirectCalls(!via.sdk)
		direct := e.srv.MCPDirectCallCount()
		before := tableRows(t, e.pool, tables...)
		e.log.start()
		for range calls {
			via.call()
		}
		n, sql := e.log.stop()
		if n != 3*calls {
			t.Errorf("%s: %d records.get took %d round trips, want %d:\n%s", via.name, calls, n, 3*calls, sql)
		}
		want := map[string]int64{"proposals": calls, "audit_events": calls, "receipts": calls}
		for table, was := range before {
			if got := tableRows(t, e.pool, table)[table] - was; got != want[table] {
				t.Errorf("%s: %d calls wrote %d rows of %s, want %d", via.name, calls, got, table, want[table])
			}
		}
		if got := e.srv.MCPDirectCallCount() - direct; via.name == "MCP" && got != calls || via.name != "MCP" && got != 0 {
			t.Errorf("%s: %d calls answered directly", via.name, got)
		}
	}
}

// An upstream read through /mcp costs PostgreSQL what it costs over REST:
// two round trips (the decision's read and the record, each one statement
// on its own), and no read of the tool's pin, which this instance keeps
// while it hears of every change (docs/mcp.md). It was seven: the pin read
// twice, BEGIN and COMMIT around the record, and a COMMIT after the
// decision's read, which wrote nothing.
func TestMCP_UpstreamReadCostsTheRoundTripsOfREST(t *testing.T) {
	t.Parallel()
	e := newCostEnv(t)
	m := openMCP(t, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	restArgs := map[string]any{"key": "k-1"}
	mcpArgs := map[string]any{"key": "k-1", "rationale": lookupRationale}
	e.restCall(t, "bench.lookup", restArgs, lookupRationale)
	m.call(t, "bench.lookup", mcpArgs)
	counts := map[string]int64{}
	for _, via := range []string{"REST", "MCP"} {
		e.log.start()
		for range 3 {
			if via == "REST" {
				e.restCall(t, "bench.lookup", restArgs, lookupRationale)
			} else {
				m.call(t, "bench.lookup", mcpArgs)
			}
		}
		n, sql := e.log.stop()
		counts[via] = n
		if n != 3*2 {
			t.Errorf("%s: 3 upstream reads took %d round trips, want 6:\n%s", via, n, sql)
		}
	}
	if counts["MCP"] != counts["REST"] {
		t.Errorf("round trips: %v", counts)
	}
}

// benchCalls times b.N calls of call, one after another, and reports per
// call: the round trips on the calls' path, this process's CPU (the
// server's, the client's and the upstream's, which run in it) and the
// CPU of the database's PostgreSQL backends.
func benchCalls(b *testing.B, e *costEnv, call func()) {
	for range 20 { // statements prepared, session held, pins read
		call()
	}
	b.ReportAllocs()
	e.log.start()
	cpu, pg := processCPU(), e.backendsCPU(b)
	b.ResetTimer()
	for b.Loop() {
		call()
	}
	b.StopTimer()
	n, _ := e.log.stop()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(e.backendsCPU(b)-pg)/float64(b.N), "pg-cpu-ns/op")
	b.ReportMetric(float64(n)/float64(b.N), "roundtrips/op")
}

// benchParallel is benchCalls with clients calling at once (each with
// its own session, made by open), as make bench's phases do.
func benchParallel(b *testing.B, e *costEnv, clients int, open func() func()) {
	callers := make(chan func(), clients)
	for range clients {
		call := open()
		for range 5 {
			call()
		}
		callers <- call
	}
	b.ReportAllocs()
	b.SetParallelism((clients + 1) / 2) // GOMAXPROCS is 2 on the bench machine
	cpu := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		call := <-callers
		for pb.Next() {
			call()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

func BenchmarkREST_RecordsGet(b *testing.B) {
	e := newCostEnv(b)
	args := map[string]any{"collection": "lookup", "key": "client-01"}
	benchCalls(b, e, func() { e.restCall(b, "records.get", args, getRationale) })
}

func BenchmarkMCP_RecordsGet(b *testing.B) {
	e := newCostEnv(b)
	m := openMCP(b, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	args := map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}
	benchCalls(b, e, func() { m.quickCall(b, "records.get", args) })
}

// BenchmarkMCP_RecordsGetThroughTheSDK is BenchmarkMCP_RecordsGet with
// every request answered by the SDK (as before direct calls).
func BenchmarkMCP_RecordsGetThroughTheSDK(b *testing.B) {
	e := newCostEnv(b)
	e.srv.MCPDirectCalls(false)
	m := openMCP(b, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	args := map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}
	benchCalls(b, e, func() { m.quickCall(b, "records.get", args) })
}

func BenchmarkREST_RecordsGet8(b *testing.B) {
	e := newCostEnv(b)
	args := map[string]any{"collection": "lookup", "key": "client-01"}
	benchParallel(b, e, 8, func() func() { return func() { e.restCall(b, "records.get", args, getRationale) } })
}

func BenchmarkMCP_RecordsGet8(b *testing.B) {
	e := newCostEnv(b)
	args := map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}
	benchParallel(b, e, 8, func() func() {
		m := openMCP(b, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
		return func() { m.quickCall(b, "records.get", args) }
	})
}

func BenchmarkMCP_RecordsGet8ThroughTheSDK(b *testing.B) {
	e := newCostEnv(b)
	e.srv.MCPDirectCalls(false)
	args := map[string]any{"collection": "lookup", "key": "client-01", "rationale": getRationale}
	benchParallel(b, e, 8, func() func() {
		m := openMCP(b, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
		return func() { m.quickCall(b, "records.get", args) }
	})
}

// BenchmarkUpstreamDirect_Read calls the upstream's tool without
// Gatehouse: the baseline of the upstream reads (make bench's "upstream
// read, direct").
func BenchmarkUpstreamDirect_Read(b *testing.B) {
	e := newCostEnv(b)
	m := openMCP(b, e.upstream, "none", nil)
	args := map[string]any{"key": "k-1"}
	benchCalls(b, e, func() { m.quickCall(b, "lookup", args) })
}

func BenchmarkREST_UpstreamRead(b *testing.B) {
	e := newCostEnv(b)
	args := map[string]any{"key": "k-1"}
	benchCalls(b, e, func() { e.restCall(b, "bench.lookup", args, lookupRationale) })
}

func BenchmarkMCP_UpstreamRead(b *testing.B) {
	e := newCostEnv(b)
	m := openMCP(b, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	args := map[string]any{"key": "k-1", "rationale": lookupRationale}
	benchCalls(b, e, func() { m.quickCall(b, "bench.lookup", args) })
}

func BenchmarkMCP_UpstreamReadThroughTheSDK(b *testing.B) {
	e := newCostEnv(b)
	e.srv.MCPDirectCalls(false)
	m := openMCP(b, e.url, e.agent, http.Header{"Gatehouse-Conversation": {e.conv}})
	args := map[string]any{"key": "k-1", "rationale": lookupRationale}
	benchCalls(b, e, func() { m.quickCall(b, "bench.lookup", args) })
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendsCPU is the CPU time the PostgreSQL backends connected to the
// test's database have used (utime and stime of /proc/<pid>/stat), when
// the cluster runs on this machine (0 otherwise).
func (e *costEnv) backendsCPU(tb testing.TB) time.Duration {
	tb.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		tb.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// After the command's closing parenthesis, utime and stime are the
		// 12th and 13th fields, in clock ticks (100 a second).
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}
