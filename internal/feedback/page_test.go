package feedback_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/feedback"
)

// triageFixture is a workspace with n feedback items, one a minute back
// from now (tools a, b and c in turn, one in five new), and an admin.
func triageFixture(t *testing.T, ctx context.Context, pool *pgxpool.Pool, slug string, n int) auth.Principal {
	t.Helper()
	p := auth.Principal{Role: auth.RoleAdmin}
	if err := pool.QueryRow(ctx, `
		WITH w AS (INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id),
		     u AS (INSERT INTO users (email, password_hash) VALUES ($1 || '@example.com', 'x') RETURNING id),
		     f AS (
		         INSERT INTO feedback (workspace_id, submitted_by_user_id, submitted_by_kind, attempted_action, expected_outcome,
		                               actual_outcome, tool_called, tool_known, severity, rationale, status, created_at)
		         SELECT w.id, u.id, 'agent', 'tried ' || i, 'it to work', 'it did not', (ARRAY['a', 'b', 'c'])[1 + i % 3], i % 3 <> 2,
		                'med', 'the agent got stuck here', CASE WHEN i % 5 = 0 THEN 'new' ELSE 'triaged' END,
		                now() - i * interval '1 minute'
		         FROM w, u, generate_series(1, $2::int) i
		         RETURNING 1)
		SELECT w.id, u.id FROM w, u, (SELECT count(*) FROM f) c`, slug, n).Scan(&p.WorkspaceID, &p.UserID); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPage_CursorIsBoundToTheWorkspaceUserAndFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	p := triageFixture(t, ctx, pool, "cursor-a", 30)
	other := triageFixture(t, ctx, pool, "cursor-b", 30)
	svc := feedback.NewService(pool, nil)
	now := time.Now()
	f := feedback.Filter{Status: feedback.StatusTriaged}
	first, err := svc.Page(ctx, p, f, feedback.PageRequest{Limit: 10}, now)
	if err != nil || len(first.Items) != 10 || first.Next == "" {
		t.Fatalf("first page: %d items, next %q (%v)", len(first.Items), first.Next, err)
	}
	if _, err := svc.Page(ctx, p, f, feedback.PageRequest{Limit: 10, Cursor: first.Next}, now); err != nil {
		t.Fatalf("the cursor itself: %v", err)
	}
	sameUserElsewhere := p
	sameUserElsewhere.WorkspaceID = other.WorkspaceID
	anotherUser := p
	anotherUser.UserID = uuid.New()
	for name, c := range map[string]struct {
		p auth.Principal
		f feedback.Filter
	}{
		"another workspace": {sameUserElsewhere, f},
		"another user":      {anotherUser, f},
		"another status":    {p, feedback.Filter{Status: feedback.StatusNew}},
		"another tool":      {p, feedback.Filter{Status: feedback.StatusTriaged, Tool: "a"}},
		"another severity":  {p, feedback.Filter{Status: feedback.StatusTriaged, Severity: feedback.SeverityMed}},
		"another since":     {p, feedback.Filter{Status: feedback.StatusTriaged, Since: now.AddDate(0, 0, -1)}},
	} {
		_, err := svc.Page(ctx, c.p, c.f, feedback.PageRequest{Limit: 10, Cursor: first.Next}, now)
		if ae, ok := err.(*apperr.Error); !ok || ae.Code != apperr.EINVALID || len(ae.Fields) != 1 || ae.Fields[0].Field != "cursor" {
			t.Errorf("%s: %v, want EINVALID naming cursor", name, err)
		}
	}
	// An agent, even an admin's, is refused before its page is looked at.
	agent := p
	agent.TokenKind = auth.TokenAgent
	if _, err := svc.Page(ctx, agent, f, feedback.PageRequest{Limit: 0, Cursor: "x"}, now); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Errorf("an agent: %v, want EFORBIDDEN", err)
	}
}

func TestCounts_ByToolAndWeekPastTheOld1000Cap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	p := triageFixture(t, ctx, pool, "counts", 1500)
	triageFixture(t, ctx, pool, "counts-other", 300)
	svc := feedback.NewService(pool, nil)
	now := time.Now()
	c, err := svc.Counts(ctx, p, feedback.Filter{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Capped || len(c.ByTool) != 3 {
		t.Fatalf("counts: %+v", c.ByTool)
	}
	for _, g := range c.ByTool {
		if g.Count != 500 || g.Known != (g.Tool != "c") {
			t.Errorf("tool %+v, want 500 items, known unless c", g)
		}
	}
	total := 0
	for _, w := range c.Weekly {
		total += w.Count
	}
	if total != 1500 || len(c.Weekly) < 13 || c.Weekly[len(c.Weekly)-1].Count == 0 {
		t.Errorf("%d weeks adding up to %d, want 1500 ending this week", len(c.Weekly), total)
	}
	// Filtered by status, the index of the status reads only its items.
	c, err = svc.Counts(ctx, p, feedback.Filter{Status: feedback.StatusNew}, now)
	if err != nil || len(c.ByTool) != 3 || c.ByTool[0].Count+c.ByTool[1].Count+c.ByTool[2].Count != 300 {
		t.Errorf("new items by tool: %+v (%v), want 300 in all", c.ByTool, err)
	}
}

// flushCounter is a response that counts the times it is flushed.
type flushCounter struct {
	bytes.Buffer
	flushes int
}

func (w *flushCounter) Flush() { w.flushes++ }

func TestExport_WritesEveryItemAPageAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	p := triageFixture(t, ctx, pool, "export", 1234)
	svc := feedback.NewService(pool, nil)
	e, err := svc.Export(ctx, p, feedback.Filter{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var w flushCounter
	if err := e.WriteCSV(ctx, &w); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&w.Buffer).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1235 || recs[1][0] == recs[2][0] {
		t.Fatalf("%d records, want a header and 1234 items", len(recs))
	}
	for i := 2; i < len(recs); i++ {
		if recs[i][1] > recs[i-1][1] {
			t.Fatalf("row %d is newer than the one before it", i)
		}
	}
	if w.flushes != 3 {
		t.Errorf("%d flushes, want one per page of 500", w.flushes)
	}
}
