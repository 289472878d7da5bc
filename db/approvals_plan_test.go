package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The approvals queue, its counts, the header's count and a packet's
// similar calls read through indexes that lead with the workspace, never
// every packet or call in history: with 30,000 calls, 12,000 packets of
// which 3,000 are pending, no plan scans approvals or proposals
// sequentially, and no plan sorts (a sort reads every row before the
// first one is returned). Each is checked as PostgreSQL plans it for the
// first calls (the values known) and for the later ones (a prepared
// statement's generic plan). Migration 29; at a million calls with 10k
// pending packets the queue took 1.3 s and the similar calls 1.4 s.
func TestApprovalsQueue_ReadsThroughIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "approvals-plan")
	// Calls: one in three is a send held for an approver (high risk), the
	// others automatic record writes; all but the held ones were decided.
	if _, err := pool.Exec(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_token_id, proposed_by_kind,
		                       tool, effect, arguments, rationale, permission_mode, disposition, risk, action_class, status,
		                       resolved_by_user_id, created_at)
		SELECT $1, $2, $3, $2, $4, 'agent',
		       CASE WHEN i % 3 = 0 THEN 't.send' ELSE 'records.put' END, 'mutate', '{}', 'a call',
		       'auto', 'auto-apply', CASE WHEN i % 3 = 0 THEN 'high' ELSE 'low' END,
		       CASE WHEN i % 3 = 0 THEN 'email.send.external' ELSE 'records.write' END,
		       CASE WHEN i % 3 = 0 THEN 'pending_approval' ELSE 'applied' END,
		       CASE WHEN i % 3 = 0 THEN NULL ELSE $2::uuid END,
		       now() - i * interval '1 second'
		FROM generate_series(1, 30000) i`, f.ws, f.user, f.conv, f.token); err != nil {
		t.Fatal(err)
	}
	// Their packets: the latest 3,000 pending, the older ones resolved.
	if _, err := pool.Exec(ctx, `
		INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, status, created_at, expires_at, resolved_at)
		SELECT workspace_id, id, 'Send it', 'approver', CASE WHEN n <= 3000 THEN 'pending' WHEN n % 3 = 0 THEN 'approved' WHEN n % 3 = 1 THEN 'rejected' ELSE 'expired' END,
		       created_at, created_at + interval '1 day', CASE WHEN n > 3000 THEN created_at + interval '1 hour' END
		FROM (SELECT id, workspace_id, created_at, row_number() OVER (ORDER BY created_at DESC) AS n FROM proposals WHERE tool = 't.send') s`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE proposals, approvals`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	roles := []string{"approver", "admin"}
	start, end := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	last := uuid.Max
	var someIDs []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(id::text) FROM (SELECT id FROM approvals ORDER BY created_at DESC LIMIT 50) s`).Scan(&someIDs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql string
		args      []any
		indexes   []string
	}{
		// The pending queue, unfiltered (the calls are not read) and
		// filtered by a tool no packet has (each call read by its key).
		{"ListPendingApprovalsPage", db.ListPendingApprovalsPageSQL,
			[]any{int64(500), roles, "", "", "", f.ws, start, uuid.Nil, int32(51)}, []string{"approvals_queue_idx"}},
		{"ListPendingApprovalsPage, narrow", db.ListPendingApprovalsPageSQL,
			[]any{int64(500), roles, "nothing.like.this", "", "high", f.ws, start, uuid.Nil, int32(51)}, []string{"approvals_queue_idx", "proposals_pkey"}},
		{"ListApprovalsPageByStatus", db.ListApprovalsPageByStatusSQL,
			[]any{int64(500), roles, "", "", "", f.ws, "approved", end, last, int32(51)}, []string{"approvals_history_idx"}},
		{"ListApprovalsPageAnyStatus", db.ListApprovalsPageAnyStatusSQL,
			[]any{int64(500), roles, "t.send", "", "", f.ws, end, last, int32(51)}, []string{"approvals_recent_idx", "proposals_pkey"}},
		{"ListApprovalsByID", db.ListApprovalsByIDSQL, []any{f.ws, someIDs, roles}, []string{"approvals_pkey", "proposals_pkey"}},
		{"CountApprovals", db.CountApprovalsSQL, []any{"high", roles, "t.send", "", f.ws, int32(100), "pending"}, []string{"approvals_queue_idx", "approvals_recent_idx", "proposals_pkey"}},
		{"CountApprovals, any status", db.CountApprovalsSQL, []any{"", roles, "", "", f.ws, int32(100), ""}, []string{"approvals_queue_idx", "approvals_recent_idx", "proposals_pkey"}},
		{"CountPendingApprovals", db.CountPendingApprovalsSQL, []any{f.ws, int32(1000), roles, uuid.New(), int32(100)}, []string{"approvals_queue_idx"}},
		{"ListSimilarProposals", db.ListSimilarProposalsSQL, []any{f.ws, "records.write", f.proposal}, []string{"proposals_decided_idx"}},
	} {
		check := func(when, text string) {
			t.Helper()
			for _, index := range c.indexes {
				if !strings.Contains(text, index) {
					t.Errorf("%s, %s: the plan does not read through %s:\n%s", c.name, when, index, text)
				}
			}
			if strings.Contains(text, "Seq Scan on approvals") || strings.Contains(text, "Seq Scan on proposals") || strings.Contains(text, "Sort") {
				t.Errorf("%s, %s: the plan reads every row:\n%s", c.name, when, text)
			}
		}
		check("first calls", explain(t, ctx, conn.Conn(), c.sql, c.args...))
		check("generic plan", explainGeneric(t, ctx, conn.Conn(), c.sql, c.args...))
	}

	// And they answer what they should.
	q := db.New(pool)
	page, err := q.ListPendingApprovalsPage(ctx, db.ListPendingApprovalsPageParams{Budget: 500, Roles: roles, WorkspaceID: f.ws,
		AfterAt: start, AfterID: uuid.Nil, PageLimit: 51})
	if err != nil || len(page) != 51 || !page[0].Matched || page[50].LastRead {
		t.Fatalf("pending page: %d rows (%v)", len(page), err)
	}
	for i := 1; i < len(page); i++ {
		if page[i].At.Before(page[i-1].At) {
			t.Fatalf("pending page out of order at %d", i)
		}
	}
	// A filter nothing matches reads its budget and says where it stopped.
	narrow, err := q.ListPendingApprovalsPage(ctx, db.ListPendingApprovalsPageParams{Budget: 500, Roles: roles, Tool: "nothing.like.this",
		WorkspaceID: f.ws, AfterAt: start, AfterID: uuid.Nil, PageLimit: 51})
	if err != nil || len(narrow) != 1 || narrow[0].Matched || !narrow[0].LastRead {
		t.Fatalf("narrow page: %+v (%v), want the 500th packet read and no match", narrow, err)
	}
	counts, err := q.CountApprovals(ctx, db.CountApprovalsParams{Status: "pending", Roles: roles, WorkspaceID: f.ws, Budget: 100})
	if err != nil || len(counts) != 5 {
		t.Fatalf("counts: %v (%v)", counts, err)
	}
	for _, c := range counts {
		// Every status has more than 100 packets: each count stops there.
		if c.Read != 100 || c.Matched != 100 || (c.Status == "pending") != (c.High == 100 && c.AnyRisk == 100) {
			t.Errorf("count of %q: %+v", c.Status, c)
		}
	}
	if n, err := q.CountPendingApprovals(ctx, db.CountPendingApprovalsParams{WorkspaceID: f.ws, Budget: 1000, Roles: roles, UserID: uuid.New(), Cap: 100}); err != nil || n != 100 {
		t.Errorf("header count: %d (%v), want the cap, 100", n, err)
	}
	if similar, err := q.ListSimilarProposals(ctx, db.ListSimilarProposalsParams{WorkspaceID: f.ws, ActionClass: pgtype.Text{String: "records.write", Valid: true}, ID: f.proposal}); err != nil || len(similar) != 10 {
		t.Errorf("similar: %d (%v), want 10", len(similar), err)
	}
}
