package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// seedFeedback writes feedback items of a new workspace: recent of them
// one every 40 minutes back from now, then old ones a year and more ago
// (history outside the default 90-day window). Twenty tools (one item in
// 500 names "rare.tool"), the three severities in turn, one in ten still
// new.
func seedFeedback(t *testing.T, ctx context.Context, pool *pgxpool.Pool, slug string, recent, old int) uuid.UUID {
	t.Helper()
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, `
		WITH w AS (INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id),
		     u AS (INSERT INTO users (email, password_hash) VALUES ($1 || '@example.com', 'x') RETURNING id),
		     f AS (
		         INSERT INTO feedback (workspace_id, submitted_by_user_id, submitted_by_kind, attempted_action, expected_outcome,
		                               actual_outcome, tool_called, tool_known, severity, rationale, status, created_at)
		         SELECT w.id, u.id, 'agent', 'tried ' || i, 'it to work', 'it did not',
		                CASE WHEN i % 500 = 0 THEN 'rare.tool' ELSE 'tool.' || (i % 20) END, i % 500 <> 0,
		                (ARRAY['low', 'med', 'high'])[1 + i % 3], 'the agent got stuck here',
		                CASE WHEN i % 10 = 0 THEN 'new' ELSE (ARRAY['triaged', 'planned', 'done', 'wontfix'])[1 + i % 4] END,
		                CASE WHEN i <= $2 THEN now() - i * interval '40 minutes' ELSE now() - interval '400 days' - i * interval '40 minutes' END
		         FROM w, u, generate_series(1, $2::int + $3::int) i
		         RETURNING 1)
		SELECT w.id FROM w, (SELECT count(*) FROM f) c`, slug, recent, old).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

// The triage list, its counts and its CSV export read through the index
// of the filter's lead, an index range from the cursor bounded by the
// page's budget, never every item (migration 36): with 3,000 items in the
// window of a workspace that has 12,000 older ones, and another workspace
// as large, no plan scans feedback sequentially. Each is checked as
// PostgreSQL plans it for the first calls (the values known) and for the
// later ones (a prepared statement's generic plan).
func TestFeedbackPage_ReadsAnIndexRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	ws := seedFeedback(t, ctx, pool, "feedback-plan", 3000, 12000)
	seedFeedback(t, ctx, pool, "feedback-plan-other", 3000, 12000)
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE feedback`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	since := time.Now().AddDate(0, 0, -90)
	end := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	var mid time.Time
	var midID uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT created_at, id FROM feedback WHERE workspace_id = $1 ORDER BY created_at DESC, id DESC OFFSET 1500 LIMIT 1`, ws).Scan(&mid, &midID); err != nil {
		t.Fatal(err)
	}
	// ListFeedbackPage: budget, page_limit, workspace, lead, since, before_at, before_id, severity, status, tool.
	// CountFeedback: lead, workspace, since, budget, severity, status, tool.
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"page", db.ListFeedbackPageSQL, "feedback_recent_idx", []any{int64(1000), int32(51), ws, "", since, end, uuid.Max, "", "", ""}},
		{"page from a cursor", db.ListFeedbackPageSQL, "feedback_recent_idx", []any{int64(1000), int32(51), ws, "", since, mid, midID, "", "", ""}},
		{"page by tool", db.ListFeedbackPageSQL, "feedback_tool_idx", []any{int64(1000), int32(51), ws, "tool", since, end, uuid.Max, "high", "", "rare.tool"}},
		{"page by status", db.ListFeedbackPageSQL, "feedback_status_idx", []any{int64(1000), int32(51), ws, "status", since, mid, midID, "low", "new", ""}},
		{"page by severity", db.ListFeedbackPageSQL, "feedback_severity_idx", []any{int64(1000), int32(51), ws, "severity", since, end, uuid.Max, "high", "", ""}},
		{"counts", db.CountFeedbackSQL, "feedback_recent_idx", []any{"", ws, since, int32(5000), "", "", ""}},
		{"counts by tool", db.CountFeedbackSQL, "feedback_tool_idx", []any{"tool", ws, since, int32(5000), "", "", "rare.tool"}},
		{"counts by status", db.CountFeedbackSQL, "feedback_status_idx", []any{"status", ws, since, int32(5000), "high", "new", ""}},
		{"counts by severity", db.CountFeedbackSQL, "feedback_severity_idx", []any{"severity", ws, since, int32(5000), "med", "", ""}},
	} {
		check := func(when, text string) {
			t.Helper()
			if !strings.Contains(text, c.index) {
				t.Errorf("%s, %s: the plan does not read through %s:\n%s", c.name, when, c.index, text)
			}
			if strings.Contains(text, "Seq Scan on feedback") {
				t.Errorf("%s, %s: the plan reads every item:\n%s", c.name, when, text)
			}
		}
		check("first calls", explain(t, ctx, conn.Conn(), c.sql, c.args...))
		check("generic plan", explainGeneric(t, ctx, conn.Conn(), c.sql, c.args...))
	}

	// And they answer what they should: the newest 50 of the window in
	// order (and one more, for the next page), and counts of all 3,000.
	q := db.New(pool)
	page, err := q.ListFeedbackPage(ctx, db.ListFeedbackPageParams{Budget: 1000, PageLimit: 51, WorkspaceID: ws, Since: since, BeforeAt: end, BeforeID: uuid.Max})
	if err != nil || len(page) != 51 {
		t.Fatalf("page: %d rows (%v)", len(page), err)
	}
	for i, r := range page {
		if !r.Matched || r.LastRead || r.Feedback.WorkspaceID != ws || i > 0 && !r.Feedback.CreatedAt.Before(page[i-1].Feedback.CreatedAt) {
			t.Fatalf("page row %d: %+v", i, r)
		}
	}
	// A filter nothing matches reads its budget and says where it stopped.
	narrow, err := q.ListFeedbackPage(ctx, db.ListFeedbackPageParams{Budget: 1000, PageLimit: 51, WorkspaceID: ws, Lead: "status", Status: "new",
		Severity: "nothing", Since: time.Time{}, BeforeAt: end, BeforeID: uuid.Max})
	if err != nil || len(narrow) != 1 || narrow[0].Matched || !narrow[0].LastRead {
		t.Fatalf("narrow page: %d rows (%v), want the 1000th item read and no match", len(narrow), err)
	}
	counts, err := q.CountFeedback(ctx, db.CountFeedbackParams{WorkspaceID: ws, Since: since, Budget: 5000})
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]int64{}
	for _, r := range counts {
		byKind[r.Kind] += r.Items
		if r.Kind == "total" && r.Read != 3000 {
			t.Errorf("the counts read %d items, want the window's 3000", r.Read)
		}
	}
	if byKind["tool"] != 3000 || byKind["week"] != 3000 || byKind["total"] != 3000 {
		t.Errorf("counts by kind: %v, want 3000 each", byKind)
	}
}
