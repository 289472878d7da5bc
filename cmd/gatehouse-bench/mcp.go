package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The MCP phases (issue 26's speed target): an upstream MCP server's read
// tool called directly and through Gatehouse's /mcp, at n clients and at
// one, and records.get through /mcp against the same call over REST.
// .ci/bench starts the upstream (gatehouse-bench -serve-upstream) before
// the server, and names it in the server's policy file as "bench", its
// tool "lookup" accepted and classified a read.

// upstreamTool is the upstream's tool: a lookup that answers at once, so
// the phases measure the gateway, not the tool.
const upstreamTool = "lookup"

// serveUpstream serves the benchmark's upstream MCP server (Streamable
// HTTP, the official SDK) on a port the kernel picks, writes its URL to
// urlFile, and serves until ctx ends.
func serveUpstream(ctx context.Context, urlFile string) error {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench-upstream", Version: "1.0"}, nil)
	type in struct {
		Key string `json:"key" jsonschema:"the key to look up"`
	}
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(bool), OpenWorldHint: new(bool)}
	sdk.AddTool(srv, &sdk.Tool{Name: upstreamTool, Description: "Look a key up.", Annotations: readOnly},
		func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "value of " + a.Key}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	if err := os.WriteFile(urlFile, []byte(url), 0o644); err != nil {
		return err
	}
	hs := &http.Server{Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// mcpResult is what the MCP phases measured against issue 26's targets.
type mcpResult struct {
	direct, through, direct1, through1, getMCP row
	// getREST and getRESTAgain are records.get over REST just before and
	// just after getMCP: the verdict compares getMCP with their mean, so
	// that the host's drift between phases is not taken for the gateway's
	// cost (as pgbench runs before and after the phases).
	getREST, getRESTAgain row
}

// restGetRate is REST's records.get calls/s around the MCP phase.
func (m *mcpResult) restGetRate() float64 {
	if m.getRESTAgain.Rate == 0 {
		return m.getREST.Rate
	}
	return (m.getREST.Rate + m.getRESTAgain.Rate) / 2
}

// mcpSession opens an MCP session the way a client does (initialize, then
// notifications/initialized) and returns its id: the phases then post
// tools/call in it as plain HTTP requests, so that the benchmark's own
// client costs the same little CPU as its REST clients (the SDK's client
// would spend as much as the server it measures, on the same two cores).
func mcpSession(ctx context.Context, endpoint string, h http.Header) (string, error) {
	post := func(body, session string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		for k, v := range mcpHeaders(h, session) {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	resp, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpProtocol+`","capabilities":{},"clientInfo":{"name":"gatehouse-bench","version":"1.0"}}}`, "")
	if err != nil {
		return "", err
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		return "", fmt.Errorf("initialize: %d, session %q", resp.StatusCode, id)
	}
	if resp, err = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("initialized: %d", resp.StatusCode)
	}
	return id, nil
}

// mcpProtocol is the protocol revision the phases speak.
const mcpProtocol = "2025-11-25"

// mcpHeaders are a request's headers in session (none: opening one).
func mcpHeaders(h http.Header, session string) http.Header {
	out := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	for k, v := range h {
		out[k] = v
	}
	if session != "" {
		out.Set("Mcp-Session-Id", session)
		out.Set("Mcp-Protocol-Version", mcpProtocol)
	}
	return out
}

// toolFailure says what is wrong with a tools/call answer: a JSON-RPC
// error or a tool error ("": nothing).
func toolFailure(body []byte) string {
	if bytes.Contains(body, []byte(`"isError":true`)) || bytes.Contains(body, []byte(`"error":{`)) {
		if len(body) > 300 {
			body = body[:300]
		}
		return "tool error: " + string(bytes.TrimSpace(body))
	}
	return ""
}

// mcpLoop is loop's counterpart for MCP: clients sessions, opened before
// the phase, each posting tools/call of tool (arguments from args) in a
// closed loop for d. A call counts when it returns a result that is not
// an error.
func (b *bench) mcpLoop(ctx context.Context, name string, clients int, d time.Duration, endpoint string, h http.Header, tool string, args func(c int, i uint64) map[string]any) (row, error) {
	sessions := make([]string, clients)
	for c := range sessions {
		id, err := mcpSession(ctx, endpoint, h)
		if err != nil {
			return row{}, fmt.Errorf("%s: open a session: %w", name, err)
		}
		sessions[c] = id
	}
	r := b.loopChecked(ctx, name, clients, d, http.StatusOK, toolFailure, func(c int, i uint64, t *vegeta.Target) error {
		params, err := json.Marshal(map[string]any{"name": tool, "arguments": args(c, i)})
		if err != nil {
			return err
		}
		t.Method, t.URL, t.Header = http.MethodPost, endpoint, mcpHeaders(h, sessions[c])
		t.Body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i+1, params)
		return nil
	})
	r.Want = "result"
	for _, id := range sessions {
		if req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodDelete, endpoint, nil); err == nil {
			req.Header = mcpHeaders(h, id)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	return r, nil
}

// mcpPhases runs the MCP phases in conversation conv (records.get's
// seeded collection is there) and adds their rows to rep; restGet is the
// REST records.get phase of the same run, just before, and restAgain runs
// it again: records.get over MCP runs first, between the two.
func (b *bench) mcpPhases(ctx context.Context, o options, rep *report, conv string, restGet row, restAgain func() row) error {
	if o.upstream == "" {
		fmt.Fprintln(b.out, "  (no -upstream: the MCP phases are skipped)")
		return nil
	}
	n := o.clients
	gate := http.Header{"Authorization": {"Bearer " + b.agent}, "Gatehouse-Conversation": {conv}}
	lookup := func(c int, i uint64) map[string]any { return map[string]any{"key": fmt.Sprintf("k-%d-%d", c, i)} }
	viaGate := func(c int, i uint64) map[string]any {
		a := lookup(c, i)
		a["rationale"] = "benchmark: look a key up upstream"
		return a
	}
	m := &mcpResult{getREST: restGet}
	var err error
	getMCP := func(_ int, i uint64) map[string]any {
		return map[string]any{"collection": "lookup", "key": fmt.Sprintf("client-%02d", i%20), "rationale": "benchmark: read a client"}
	}
	if m.getMCP, err = b.mcpLoop(ctx, "records.get, through /mcp", n, o.duration, b.base+"/mcp", gate, "records.get", getMCP); err != nil {
		return err
	}
	m.getMCP.Note = "records.get of a seeded record over MCP, between the REST row records.get, auto-run and the same again"
	rep.phases = append(rep.phases, m.getMCP)
	fmt.Fprintln(b.out, progress(m.getMCP))
	m.getRESTAgain = restAgain()
	m.getRESTAgain.Note = "records.get, auto-run again, right after records.get through /mcp"
	rep.phases = append(rep.phases, m.getRESTAgain)
	fmt.Fprintln(b.out, progress(m.getRESTAgain))
	phases := []struct {
		into           *row
		name, note     string
		clients        int
		endpoint, tool string
		h              http.Header
		args           func(int, uint64) map[string]any
	}{
		{&m.direct, "upstream read, direct", "the upstream MCP server's read tool called with the SDK's client, each client its own session: the baseline of the next row", n, o.upstream, upstreamTool, nil, lookup},
		{&m.through, "upstream read, through /mcp", "the same tool through Gatehouse's /mcp (bench.lookup): decided, recorded, forwarded, recorded", n, b.base + "/mcp", "bench." + upstreamTool, gate, viaGate},
		{&m.direct1, "upstream read, direct, single client", "one client", 1, o.upstream, upstreamTool, nil, lookup},
		{&m.through1, "upstream read, through /mcp, single client", "one client", 1, b.base + "/mcp", "bench." + upstreamTool, gate, viaGate},
	}
	for _, p := range phases {
		if *p.into, err = b.mcpLoop(ctx, p.name, p.clients, o.duration, p.endpoint, p.h, p.tool, p.args); err != nil {
			return err
		}
		p.into.Note = p.note
		rep.phases = append(rep.phases, *p.into)
		fmt.Fprintln(b.out, progress(*p.into))
	}
	rep.mcp = m
	return nil
}

// verdicts are the MCP phases' figures against issue 26's targets.
func (m *mcpResult) verdicts() []string {
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	mark := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "miss"
	}
	through := ratio(m.through.Rate, m.direct.Rate)
	added := m.through1.P50 - m.direct1.P50
	get := ratio(m.getMCP.Rate, m.restGetRate())
	return []string{
		fmt.Sprintf("an upstream read through /mcp at %d clients: %.0f calls/s against %.0f direct, %.2f× (target at least 0.6×): %s",
			m.through.Clients, m.through.Rate, m.direct.Rate, through, mark(through >= 0.6)),
		fmt.Sprintf("one client: median %s through /mcp against %s direct, %s added (target at most 1.5 ms): %s",
			fmtDur(m.through1.P50), fmtDur(m.direct1.P50), fmtDur(added), mark(added <= 1500*time.Microsecond)),
		fmt.Sprintf("records.get through /mcp: %.0f calls/s against %.0f over REST (the mean of %.0f just before and %.0f just after), %.2f× (target within 10 %%, at least 0.90×): %s",
			m.getMCP.Rate, m.restGetRate(), m.getREST.Rate, m.getRESTAgain.Rate, get, mark(get >= 0.9)),
	}
}
