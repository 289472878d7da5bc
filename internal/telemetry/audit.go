package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/rollup"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// AuditFeed is the roll-up feed that exports the audit log
// (rollup_feeds, migration 45): on every instance, one at a time, so each
// row is exported once; a row is handed to the exporters as its span of
// the log is folded.
const AuditFeed = "audit_export"

// auditBatch is how many audit rows one turn exports at most.
const auditBatch = 1000

// Exports reports whether the audit log is exported at all.
func (t *Telemetry) Exports() bool { return t != nil && (t.logger != nil || t.jsonl != nil) }

// AuditRollUp is one turn of the audit export feed. Without an exporter
// it only keeps the feed at the log's head, so that turning the export on
// starts from then.
func (t *Telemetry) AuditRollUp(pool *pgxpool.Pool) rollup.Step {
	return func(ctx context.Context) (rollup.Progress, error) {
		return rollup.Advance(ctx, pool, rollup.Feed{Name: AuditFeed, Tables: []string{"audit_events"}, GenericPlans: true,
			Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.AuditHead(ctx) },
			Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
				if !t.Exports() {
					return upto, nil // nothing to export to: the feed keeps up
				}
				rows, err := q.ListAuditSpan(ctx, db.ListAuditSpanParams{After: after, Upto: upto, MaxRows: auditBatch})
				if err != nil {
					return after, err
				}
				if len(rows) == auditBatch {
					upto = rows[len(rows)-1].ID
				}
				for _, r := range rows {
					t.exportAudit(ctx, r)
				}
				return upto, nil
			},
		})
	}
}

// AuditRecord is an audit row as it is exported.
type AuditRecord struct {
	ID          int64           `json:"id"`
	Time        time.Time       `json:"time"`
	WorkspaceID string          `json:"workspace_id"`
	ActorKind   string          `json:"actor_kind"`
	ActorUserID string          `json:"actor_user_id,omitempty"`
	ActorToken  string          `json:"actor_token_id,omitempty"`
	Action      string          `json:"action"`
	SubjectType string          `json:"subject_type"`
	SubjectID   string          `json:"subject_id"`
	Data        json.RawMessage `json:"data,omitempty"`
}

func (t *Telemetry) exportAudit(ctx context.Context, r db.ListAuditSpanRow) {
	rec := AuditRecord{ID: r.ID, Time: r.CreatedAt.UTC(), WorkspaceID: r.WorkspaceID.String(), ActorKind: r.ActorKind, Action: r.Action,
		SubjectType: r.SubjectType, SubjectID: r.SubjectID, Data: RedactAudit(r.Data, t.piiFields())}
	if r.ActorUserID.Valid {
		rec.ActorUserID = r.ActorUserID.UUID.String()
	}
	if r.ActorTokenID.Valid {
		rec.ActorToken = r.ActorTokenID.UUID.String()
	}
	if t.jsonl != nil {
		t.jsonl.write(rec)
	}
	if t.logger == nil {
		return
	}
	var lr otellog.Record
	lr.SetTimestamp(rec.Time)
	lr.SetObservedTimestamp(time.Now())
	lr.SetSeverity(otellog.SeverityInfo)
	lr.SetEventName("gatehouse." + rec.Action)
	lr.SetBody(attribute.StringValue(rec.Action))
	lr.AddAttributes(
		attribute.Int64("gatehouse.audit.id", rec.ID),
		attribute.String("gatehouse.workspace_id", rec.WorkspaceID),
		attribute.String("gatehouse.actor.kind", rec.ActorKind),
		attribute.String("gatehouse.actor.user_id", rec.ActorUserID),
		attribute.String("gatehouse.actor.token_id", rec.ActorToken),
		attribute.String("gatehouse.subject.type", rec.SubjectType),
		attribute.String("gatehouse.subject.id", rec.SubjectID),
		attribute.String("gatehouse.data", string(rec.Data)),
	)
	t.logger.Emit(ctx, lr)
}

// PIIFields names the personal-data fields of the tool named tool (its
// contract's pii_fields); for "" or a tool it does not know, those of
// every tool. *tools.Registry's PIIFields is one.
type PIIFields func(tool string) []string

// RedactPIIWith has the audit export redact the personal-data fields that
// pii names (the registry's, upstream tools included). Until it is
// called, the built-in tools' fields are redacted.
func (t *Telemetry) RedactPIIWith(pii PIIFields) {
	if t != nil {
		t.pii.Store(&pii)
	}
}

var (
	builtinPIIOnce sync.Once
	builtinPII     PIIFields
)

// piiFields is what RedactPIIWith set, else the built-in tools' fields.
func (t *Telemetry) piiFields() PIIFields {
	if p := t.pii.Load(); p != nil {
		return *p
	}
	builtinPIIOnce.Do(func() {
		builtinPII = func(string) []string { return []string{} }
		if r, err := tools.Builtin(); err == nil {
			builtinPII = r.PIIFields
		}
	})
	return builtinPII
}

// argumentKeys are the keys of an audit row's data that hold a call's
// arguments: arguments (a call refused at effect after an edit), before
// and after (an edit).
var argumentKeys = []string{"arguments", "before", "after"}

// RedactAudit is an audit row's data as it is exported: in the arguments
// it carries, the value of each personal-data field of the row's tool
// (its data's "tool"; every tool's when it names none) is replaced by
// "[redacted]". Data that is not a JSON object carries no arguments.
func RedactAudit(data json.RawMessage, pii PIIFields) json.RawMessage {
	var row map[string]json.RawMessage
	if pii == nil || json.Unmarshal(data, &row) != nil {
		return data
	}
	var fields []string
	changed := false
	for _, k := range argumentKeys {
		v, ok := row[k]
		if !ok {
			continue
		}
		if fields == nil {
			var tool string
			_ = json.Unmarshal(row["tool"], &tool)
			if fields = pii(tool); fields == nil {
				fields = []string{}
			}
		}
		if out := tools.RedactPII(v, fields); !bytes.Equal(out, v) {
			row[k], changed = out, true
		}
	}
	if !changed {
		return data
	}
	out, err := json.Marshal(row)
	if err != nil {
		return data
	}
	return out
}

// jsonLines writes audit records, one JSON object a line, to stdout or a
// file (appended).
type jsonLines struct {
	mu  sync.Mutex
	w   io.Writer
	c   io.Closer
	enc *json.Encoder
}

func openJSONLines(where string) (*jsonLines, error) {
	if where == "stdout" {
		return &jsonLines{w: os.Stdout, enc: json.NewEncoder(os.Stdout)}, nil
	}
	f, err := os.OpenFile(where, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("telemetry: open %s: %w", where, err)
	}
	return &jsonLines{w: f, c: f, enc: json.NewEncoder(f)}, nil
}

func (j *jsonLines) write(rec AuditRecord) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(rec)
}

func (j *jsonLines) Close() error {
	if j.c == nil {
		return nil
	}
	return j.c.Close()
}
