package web_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/telemetry"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// otlpReceiver is a small OTLP/HTTP receiver: the spans and the log
// records' event names it was sent.
type otlpReceiver struct {
	url    string
	mu     sync.Mutex
	spans  []*tracepb.Span
	events []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	o := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		o.mu.Lock()
		defer o.mu.Unlock()
		switch r.URL.Path {
		case "/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					o.spans = append(o.spans, ss.Spans...)
				}
			}
		case "/v1/logs":
			var req collogs.ExportLogsServiceRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rl := range req.ResourceLogs {
				for _, sl := range rl.ScopeLogs {
					for _, lr := range sl.LogRecords {
						o.events = append(o.events, lr.EventName)
					}
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

func (o *otlpReceiver) span(name string) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func attrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value.GetStringValue()
	}
	return out
}

// Every tool call is a span, over REST and MCP, inside the caller's trace
// (its W3C traceparent), named and attributed as OpenTelemetry's GenAI
// conventions name a tool's execution, with what Gatehouse decided; a
// refusal is an error span. Audit rows arrive as log records.
func TestTelemetry_ASpanPerCallInTheCallersTraceAndTheAuditLogAsLogs(t *testing.T) {
	o := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", o.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_BLRP_SCHEDULE_DELAY", "100")
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: os.Getenv, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvConfig(t, dbtest.MustPool(t), registry, web.Config{CookieSecure: true, Telemetry: tel})
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Traced"})
	path := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"

	const restTrace, mcpTrace = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	call := func(body map[string]any, trace string) int {
		req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(mustJSON(t, body)))
		req.Header.Set("Authorization", "Bearer "+agent)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := call(map[string]any{"tool": "records.search", "arguments": map[string]any{"query": "acme"}, "rationale": "find the customer's record"}, restTrace); status != http.StatusOK {
		t.Fatalf("records.search: %d", status)
	}
	if status := call(map[string]any{"tool": "webhook.post", "arguments": map[string]any{"url": "https://hooks.example.com/x", "payload": map[string]any{}},
		"rationale": "notify the hook the owner named", "idempotency_key": "traced-refusal-000001"}, restTrace); status != http.StatusForbidden {
		t.Fatalf("webhook.post: %d", status)
	}
	s := e.mustMCP(agent, "traced-agent", map[string]string{"Gatehouse-Conversation": conv["id"].(string), "traceparent": "00-" + mcpTrace + "-b7ad6b7169203331-01"})
	// A read of a record that is not there: it runs, and fails.
	callTool(t, s, "records.get", map[string]any{"collection": "c", "key": "k", "rationale": "read the record over MCP"})

	var search, refused, overMCP *tracepb.Span
	waitFor(t, "three spans", func() bool {
		search, refused, overMCP = o.span("execute_tool records.search"), o.span("execute_tool webhook.post"), o.span("execute_tool records.get")
		return search != nil && refused != nil && overMCP != nil
	})
	if got := hex.EncodeToString(search.TraceId); got != restTrace {
		t.Errorf("the REST call's span is in trace %s, want the caller's %s", got, restTrace)
	}
	if got := hex.EncodeToString(overMCP.TraceId); got != mcpTrace {
		t.Errorf("the MCP call's span is in trace %s, want the caller's %s", got, mcpTrace)
	}
	a := attrs(search)
	for k, want := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "records.search", "gatehouse.status": "applied",
		"gatehouse.decision.state": "allowed", "gatehouse.authority": "read", "gatehouse.action_class": "read.context"} {
		if a[k] != want {
			t.Errorf("span attribute %s = %q, want %q (%v)", k, a[k], want, a)
		}
	}
	if a["gen_ai.tool.call.id"] == "" {
		t.Errorf("the span has no call id: %v", a)
	}
	if refused.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || attrs(refused)["gatehouse.refusal"] == "" {
		t.Errorf("the refusal's span: %v %v", refused.Status, attrs(refused))
	}
	waitFor(t, "the audit rows as log records", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, e := range o.events {
			if e == "gatehouse.proposal.refused" {
				return true
			}
		}
		return false
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
