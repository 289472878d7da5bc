package db_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/internal/trust"
)

// fillHistory writes n calls of f's owner over the last 60 days (their
// proposal.created audit rows; one in 50 refused at the gate instead, one
// in 20 decided by the owner, one in 20 still pending) and n evidence
// rows over four classes, then vacuums and analyzes them.
func fillHistory(t *testing.T, ctx context.Context, pool *pgxpool.Pool, f callFixture, n int) {
	t.Helper()
	if _, err := pool.Exec(ctx, `
		WITH p AS (
			INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
			                       rationale, permission_mode, disposition, action_class, status, apply_path, resolved_by_user_id,
			                       claimed_at, resolved_at, created_at)
			SELECT $1, $2, $3, $2, 'agent', 'records.put', 'mutate', '{}', 'save the invoice ' || i, 'approve', 'propose', 'records.write',
			       CASE WHEN i % 20 = 1 THEN 'pending' ELSE 'applied' END,
			       CASE WHEN i % 20 = 1 THEN NULL WHEN i % 20 = 0 THEN 'human' ELSE 'auto' END,
			       CASE WHEN i % 20 <> 1 AND i % 20 = 0 THEN $2::uuid END,
			       CASE WHEN i % 20 <> 1 THEN now() - i * interval '4 minutes' + interval '90 seconds' END,
			       CASE WHEN i % 20 <> 1 THEN now() - i * interval '4 minutes' + interval '91 seconds' END,
			       now() - i * interval '4 minutes'
			FROM generate_series(1, $4::int) i WHERE i % 50 <> 0
			RETURNING id, created_at
		)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at)
		SELECT $1, 'agent', 'proposal.created', 'proposal', p.id::text, '{"tool": "records.put"}', p.created_at FROM p`,
		f.ws, f.user, f.conv, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at)
		SELECT $1, 'agent', 'proposal.refused', 'tool', 'webhook.post',
		       '{"tool": "webhook.post", "action_class": "webhook.post.external", "rationale": "tell the invoices channel"}',
		       now() - i * interval '4 minutes'
		FROM generate_series(50, $2::int, 50) i`, f.ws, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight, created_at)
		SELECT $1, (ARRAY['records.write', 'email.send.external', 'draft.compose', 'tool.call.local'])[1 + i % 4],
		       CASE WHEN i % 7 = 0 THEN 'rejected' ELSE 'approved' END, 'receipt',
		       CASE WHEN i % 7 = 0 THEN -1 ELSE 0.85 END, 1, CASE WHEN i % 7 = 0 THEN -1 ELSE 0.85 END,
		       now() - i * interval '4 minutes'
		FROM generate_series(1, $2::int) i`, f.ws, n); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"proposals", "audit_events", "evidence"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			t.Fatal(err)
		}
	}
}

// rollUpAll runs both roll-ups until they have folded every row.
func rollUpAll(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ts, is := trust.NewService(pool, registry.Classes()), intent.NewService(pool)
	q := db.New(pool)
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("the roll-ups do not catch up")
		}
		if _, err := ts.RollUp(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := is.RollUp(ctx); err != nil {
			t.Fatal(err)
		}
		e, err := q.GetRollupFeed(ctx, trust.EvidenceFeed)
		if err != nil {
			t.Fatal(err)
		}
		a, err := q.GetRollupFeed(ctx, intent.FeedName)
		if err != nil {
			t.Fatal(err)
		}
		eh, _ := q.EvidenceHead(ctx)
		ah, _ := q.AuditHead(ctx)
		if e.FoldedTo == eh && a.FoldedTo == ah {
			return
		}
	}
}

// /trust and /admin/intent read aggregates and the rows the roll-up has
// not folded yet, each through an index: with 20,000 calls and 20,000
// evidence rows folded, no query of either page scans evidence,
// proposals or audit_events (migration 30: at 100,000 calls the pages
// took 139 and 218 ms, growing with history).
func TestTrustAndIntentPages_ReadAggregatesNotHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "rollup-pages")
	fillHistory(t, ctx, pool, f, 20000)
	rollUpAll(t, ctx, pool)
	for _, table := range []string{"evidence_totals", "call_days", "call_days_open"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// As the pages run them (intent.TurnOffJIT).
	if _, err := conn.Exec(ctx, "SET jit = off"); err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	audit, err := q.GetRollupFeed(ctx, intent.FeedName)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	since, until := now.AddDate(0, 0, -30), now.AddDate(0, 0, 1)
	day := func(t time.Time) pgtype.Date { return pgtype.Date{Time: t.UTC().Truncate(24 * time.Hour), Valid: true} }
	ws := uuid.NullUUID{UUID: f.ws, Valid: true}
	classes := []string{"draft.compose", "email.send.external", "records.write", "tool.call.local"}
	for _, c := range []struct {
		name, sql string
		args      []any
		indexes   []string
	}{
		{"EvidenceTotals", db.EvidenceTotalsSQL, []any{f.ws, int32(trust.EvidenceTailCap)}, []string{"evidence_pkey"}},
		{"LatestEvidence", db.LatestEvidenceSQL, []any{classes, f.ws, int32(trust.LatestPerClass)}, []string{"evidence_class_idx"}},
		{"CallDays", db.CallDaysSQL, []any{f.ws, day(since), day(until)}, nil},
		{"AuditBatchEnd (a page's tail)", db.AuditBatchEndSQL, []any{audit.FoldedTo, int64(math.MaxInt64), ws, int32(intent.TailCap)}, []string{"audit_events_pkey"}},
		{"CallEvents (a page's tail)", db.CallEventsSQL, []any{audit.FoldedTo - 50, int64(math.MaxInt64), ws},
			[]string{"audit_events_pkey", "proposals_pkey", "call_days_open_pkey"}},
		{"IntentCalls", db.IntentCallsSQL, []any{int32(200), f.ws, since, until}, []string{"proposals_owner_time_idx", "audit_events_refused_idx"}},
		{"IntentWordMatches", db.IntentWordMatchesSQL, []any{int32(200), f.ws, since, until, int32(intent.WordScan), "invoice"},
			[]string{"proposals_owner_time_idx", "audit_events_refused_idx"}},
	} {
		check := func(when, text string) {
			t.Helper()
			for _, index := range c.indexes {
				if !strings.Contains(text, index) {
					t.Errorf("%s, %s: the plan does not read through %s:\n%s", c.name, when, index, text)
				}
			}
			for _, table := range []string{"evidence", "proposals", "audit_events"} {
				if strings.Contains(text, "Seq Scan on "+table+" ") {
					t.Errorf("%s, %s: the plan reads every row of %s:\n%s", c.name, when, table, text)
				}
			}
		}
		check("first calls", explain(t, ctx, conn.Conn(), c.sql, c.args...))
		check("generic plan", explainGeneric(t, ctx, conn.Conn(), c.sql, c.args...))
		if testing.Verbose() {
			t.Logf("%s:\n%s", c.name, explain(t, ctx, conn.Conn(), "(ANALYZE, BUFFERS) "+c.sql, c.args...))
		}
	}
}
