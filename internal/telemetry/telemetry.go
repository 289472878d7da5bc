// Package telemetry exports what Gatehouse decides to the tools operators
// already watch (issue 28, item 4): a span per tool call, following
// OpenTelemetry's GenAI semantic conventions for tool execution, inside
// the caller's trace when it sends a W3C traceparent; and every audit row
// as a log record (and, for SIEMs that tail, as a JSON line). It uses the
// official Go SDK, configured by the standard OTEL_EXPORTER_OTLP_*
// environment variables, and is off when none names an endpoint.
//
// Export never slows or blocks a call: spans and log records go to
// bounded queues that batch them out in the background; what does not fit
// is dropped and counted (gatehouse_telemetry_dropped_total in /metrics).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// queueSize bounds each export queue.
const queueSize = 4096

// Telemetry exports spans and log records; the zero value (and nil)
// exports nothing.
type Telemetry struct {
	tracer  trace.Tracer
	logger  otellog.Logger
	spans   *sdktrace.TracerProvider
	logs    *sdklog.LoggerProvider
	queued  atomic.Int64 // spans handed to the batcher, not yet exported
	dropped prometheus.Counter
	jsonl   *jsonLines
	// pii names the fields the audit export redacts (RedactPIIWith).
	pii atomic.Pointer[PIIFields]
}

// Config is what Setup reads: the environment (the standard
// OTEL_EXPORTER_OTLP_* variables, OTEL_SERVICE_NAME) and where audit rows
// go as JSON lines ("" none, "stdout", or a file).
type Config struct {
	Getenv      func(string) string
	Version     string
	AuditJSONL  string
	LogExporter sdklog.Exporter // tests
}

// Enabled reports whether the environment names an OTLP endpoint.
func Enabled(getenv func(string) string) bool {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"} {
		if getenv(k) != "" {
			return true
		}
	}
	return false
}

// Setup builds the exporters the environment asks for: OTLP over HTTP
// (http/protobuf, the default) or gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc)
// when an endpoint is set, and the JSON lines writer when asked. With
// neither, it returns a Telemetry that does nothing.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	t := &Telemetry{tracer: noop.NewTracerProvider().Tracer("gatehouse")}
	t.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "gatehouse_telemetry_dropped_total",
		Help: "Spans and log records dropped because an export queue was full."})
	if cfg.AuditJSONL != "" {
		w, err := openJSONLines(cfg.AuditJSONL)
		if err != nil {
			return nil, err
		}
		t.jsonl = w
	}
	if !Enabled(cfg.Getenv) {
		return t, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(orDefault(cfg.Getenv("OTEL_SERVICE_NAME"), "gatehouse")), semconv.ServiceVersion(cfg.Version)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	var spans sdktrace.SpanExporter
	switch p := cfg.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); orDefault(p, orDefault(cfg.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")) {
	case "grpc":
		spans, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		spans, err = otlptracehttp.New(ctx)
	default:
		return nil, errors.New("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or grpc")
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: span exporter: %w", err)
	}
	t.spans = sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(&bounded{t: t, next: sdktrace.NewBatchSpanProcessor(&counting{t: t, SpanExporter: spans},
			sdktrace.WithMaxQueueSize(queueSize))}))
	t.tracer = t.spans.Tracer("gatehouse")
	logs := cfg.LogExporter
	if logs == nil {
		// Audit log records: OTLP over HTTP (the logs signal's gRPC
		// exporter is not used: one protocol for logs is enough).
		if logs, err = otlploghttp.New(ctx); err != nil {
			return nil, fmt.Errorf("telemetry: log exporter: %w", err)
		}
	}
	t.logs = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewBatchProcessor(logs, sdklog.WithMaxQueueSize(queueSize))))
	t.logger = t.logs.Logger("gatehouse.audit")
	return t, nil
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// Shutdown flushes what waits and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.spans != nil {
		errs = append(errs, t.spans.Shutdown(ctx))
	}
	if t.logs != nil {
		errs = append(errs, t.logs.Shutdown(ctx))
	}
	if t.jsonl != nil {
		errs = append(errs, t.jsonl.Close())
	}
	return errors.Join(errs...)
}

// bounded drops a span when queueSize spans wait for export, counting it,
// instead of letting the batcher drop it silently.
type bounded struct {
	t    *Telemetry
	next sdktrace.SpanProcessor
}

func (b *bounded) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { b.next.OnStart(ctx, s) }
func (b *bounded) OnEnd(s sdktrace.ReadOnlySpan) {
	if b.t.queued.Load() >= queueSize {
		b.t.dropped.Inc()
		return
	}
	b.t.queued.Add(1)
	b.next.OnEnd(s)
}
func (b *bounded) Shutdown(ctx context.Context) error   { return b.next.Shutdown(ctx) }
func (b *bounded) ForceFlush(ctx context.Context) error { return b.next.ForceFlush(ctx) }

// counting tells bounded how many spans left the queue.
type counting struct {
	t *Telemetry
	sdktrace.SpanExporter
}

func (c *counting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.t.queued.Add(-int64(len(spans)))
	return c.SpanExporter.ExportSpans(ctx, spans)
}

// propagator reads the caller's W3C traceparent (and tracestate).
var propagator = propagation.TraceContext{}

// Extract is ctx inside the caller's trace when header carries a W3C
// traceparent (and tracestate).
func Extract(ctx context.Context, header http.Header) context.Context {
	if header == nil {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(header))
}

// Propose runs propose (a tool call through the service) inside a span of
// its own, a child of ctx's trace (Extract), named and attributed as
// OpenTelemetry's GenAI conventions name a tool's execution, with what
// Gatehouse decided.
func (t *Telemetry) Propose(ctx context.Context, tool string, propose func(context.Context) (proposals.Proposal, error)) (proposals.Proposal, error) {
	if t == nil || t.spans == nil {
		return propose(ctx)
	}
	ctx, span := t.tracer.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.tool.type", "function")))
	p, err := propose(ctx)
	span.SetAttributes(CallAttributes(p)...)
	if err != nil {
		span.SetStatus(codes.Error, "refused")
		span.SetAttributes(attribute.String("gatehouse.refusal", err.Error()))
	} else if p.Status == proposals.StatusFailed {
		span.SetStatus(codes.Error, "failed")
	}
	span.End()
	return p, err
}

// Dropped counts what the export queues dropped (for /metrics).
func (t *Telemetry) Dropped() prometheus.Counter { return t.dropped }

// CallAttributes are a recorded call's attributes: its id, and what was
// decided (state, disposition, the layer that decided, action class,
// authority class, who approved, the grant that allowed it).
func CallAttributes(p proposals.Proposal) []attribute.KeyValue {
	if p.ID == uuid.Nil {
		return nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.tool.call.id", p.ID.String()),
		attribute.String("gatehouse.status", p.Status),
		attribute.String("gatehouse.authority", string(p.Authority)),
		attribute.String("gatehouse.action_class", p.ActionClass),
	}
	if d := p.Decision; d != nil {
		attrs = append(attrs, attribute.String("gatehouse.decision.state", string(d.State)), attribute.String("gatehouse.decision.disposition", d.Disposition))
		if l := decidingLayer(d); l != "" {
			attrs = append(attrs, attribute.String("gatehouse.decision.layer", l))
		}
		for _, l := range d.Layers {
			if l.Layer == "grant" && l.State == policy.StateAllowed {
				attrs = append(attrs, attribute.String("gatehouse.grant", l.Reason))
			}
		}
	}
	if p.ResolvedByUserID.Valid && p.ApplyPath != proposals.PathAuto {
		attrs = append(attrs, attribute.String("gatehouse.approver", p.ResolvedByUserID.UUID.String()))
	}
	return attrs
}

// decidingLayer is the layer whose state the decision took: the first
// whose state is the decision's (the strictest), or "" when every layer
// allowed the call.
func decidingLayer(d *policy.Decision) string {
	for _, l := range d.Layers {
		if l.State == d.State && l.State != policy.StateAllowed {
			return l.Layer
		}
	}
	return ""
}
