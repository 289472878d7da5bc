package db_test

import (
	"context"
	"testing"

	"github.com/gatehouse/gatehouse/internal/intent"
)

// fatigueDirect counts, per day, class and tool, what call_days should
// hold of the workspace's calls (every proposal, finished or not), read
// from the proposals themselves.
const fatigueDirect = `
	WITH direct AS (
		SELECT day, action_class, tool::text AS tool, count(*) AS calls, count(*) FILTER (WHERE decided) AS decisions,
		       count(*) FILTER (WHERE fast_approval) AS fast_approvals, count(*) FILTER (WHERE rejected) AS rejections
		FROM proposal_call_facts WHERE workspace_id = $1 GROUP BY 1, 2, 3
	), kept AS (
		SELECT day, action_class, tool, calls, decisions, fast_approvals, rejections FROM call_days
		WHERE workspace_id = $1 AND (calls <> 0 OR decisions <> 0 OR fast_approvals <> 0 OR rejections <> 0)
	)
	SELECT count(*) FROM ((SELECT * FROM direct EXCEPT SELECT * FROM kept) UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM direct)) x`

// Migration 48 adds the fast approvals and rejections to the calls the
// roll-up has already counted: a finished call on its counted day, a call
// counted as unfinished only as far as it was decided when counted, a
// call after the watermark not at all (the roll-up counts it whole). Once
// the roll-up has folded the rest (and the changes of the unfinished
// calls), call_days equals what the proposals themselves give.
func TestFatigueMigration_BackfillsWhatTheRollUpCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, pool := atVersion(t, ctx, 46)
	f := newCallFixture(t, ctx, pool, "fatigue")
	if _, err := pool.Exec(ctx, `DELETE FROM proposals WHERE id = $1`, f.proposal); err != nil { // it has no audit row: never counted
		t.Fatal(err)
	}
	// kind: 0 fast by the owner, 1 slow, 2 edited, 3 rejected, 4 automatic,
	// 5 applying (claimed fast, unfinished), 6 pending, 7 fast by an
	// approver; over three days.
	calls := `
		WITH p AS (
			INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
			                       rationale, permission_mode, disposition, action_class, status, apply_path, resolved_by_user_id,
			                       applied_arguments, claimed_at, resolved_at, created_at)
			SELECT $1, $2, $3, $2, 'agent', 'records.put', 'mutate', '{}', 'a call', 'approve', 'propose', 'tool.call.local',
			       (ARRAY['applied', 'applied', 'applied', 'rejected', 'applied', 'applying', 'pending', 'applied'])[1 + k],
			       (ARRAY['human', 'human', 'human', NULL, 'auto', 'human', NULL, 'approval'])[1 + k],
			       CASE WHEN k <> 6 THEN $2::uuid END,
			       CASE WHEN k = 2 THEN '{"x": 1}'::jsonb END,
			       CASE WHEN k IN (0, 2, 5, 7) THEN c + interval '90 seconds' WHEN k = 1 THEN c + interval '9 minutes' WHEN k = 4 THEN c END,
			       CASE WHEN k IN (0, 1, 2, 4, 7) THEN c + interval '10 minutes' WHEN k = 3 THEN c + interval '40 seconds' END,
			       c
			FROM generate_series(1, $4::int) i, LATERAL (SELECT i % 8 AS k, now() - (i % 3) * interval '1 day' - interval '1 hour' AS c) x
			RETURNING id, created_at
		)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at)
		SELECT $1, 'agent', 'proposal.created', 'proposal', p.id::text, '{"tool": "records.put"}', p.created_at FROM p`
	if _, err := pool.Exec(ctx, calls, f.ws, f.user, f.conv, 80); err != nil {
		t.Fatal(err)
	}
	// What the roll-up had counted of them (as migration 30's backfill
	// counts), with its watermark after them.
	for _, sql := range []string{`
		INSERT INTO call_days (workspace_id, day, action_class, tool, calls, refused, edited, decisions, decision_hist)
		SELECT workspace_id, day, action_class, tool, count(*), count(*) FILTER (WHERE refused), count(*) FILTER (WHERE edited),
		       count(*) FILTER (WHERE decided),
		       coalesce(gatehouse_hist_sum(array_fill(0, ARRAY[decision_bucket]) || 1) FILTER (WHERE decided), '{}')
		FROM proposal_call_facts WHERE workspace_id = $1
		GROUP BY workspace_id, day, action_class, tool`, `
		INSERT INTO call_days_open (proposal_id, workspace_id, day, action_class, tool, refused, edited, decided, decision_bucket)
		SELECT id, workspace_id, day, action_class, tool, refused, edited, decided, decision_bucket FROM proposal_call_facts WHERE workspace_id = $1 AND open`, `
		UPDATE rollup_feeds SET folded_to = (SELECT max(id) FROM audit_events), next_to = (SELECT max(id) FROM audit_events), next_writers = '{}'
		WHERE feed = 'audit_events' AND $1::uuid IS NOT NULL`} {
		if _, err := pool.Exec(ctx, sql, f.ws); err != nil {
			t.Fatal(err)
		}
	}
	// Calls after the watermark: not counted yet.
	if _, err := pool.Exec(ctx, calls, f.ws, f.user, f.conv, 16); err != nil {
		t.Fatal(err)
	}

	if err := m.To(48); err != nil {
		t.Fatal(err)
	}
	// 80 calls: ten of each kind; fast: kinds 0 and 7 finished, and 5
	// counted as decided; rejected: kind 3.
	var fast, rejected, openFast int64
	if err := pool.QueryRow(ctx, `SELECT sum(fast_approvals), sum(rejections), (SELECT count(*) FROM call_days_open WHERE fast_approval)
		FROM call_days WHERE workspace_id = $1`, f.ws).Scan(&fast, &rejected, &openFast); err != nil {
		t.Fatal(err)
	}
	if fast != 30 || rejected != 10 || openFast != 10 {
		t.Fatalf("backfilled %d fast approvals (want 30), %d rejections (want 10), %d unfinished fast (want 10)", fast, rejected, openFast)
	}

	// The unfinished calls finish (the applying ones, the pending ones
	// rejected), with their audit rows, and the roll-up folds everything.
	if _, err := pool.Exec(ctx, `
		WITH done AS (
			UPDATE proposals SET status = CASE status WHEN 'applying' THEN 'applied' ELSE 'rejected' END,
			       resolved_by_user_id = $2, resolved_at = created_at + interval '2 minutes'
			WHERE workspace_id = $1 AND status IN ('applying', 'pending')
			RETURNING id, status
		)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id)
		SELECT $1, 'user', 'proposal.' || status, 'proposal', id::text FROM done`, f.ws, f.user); err != nil {
		t.Fatal(err)
	}
	svc := intent.NewService(pool)
	for turn := 0; ; turn++ {
		var behind bool
		if err := pool.QueryRow(ctx, `SELECT folded_to < (SELECT max(id) FROM audit_events) FROM rollup_feeds WHERE feed = 'audit_events'`).Scan(&behind); err != nil {
			t.Fatal(err)
		}
		if !behind {
			break
		}
		if turn == 50 {
			t.Fatal("the roll-up did not fold the audit rows in 50 turns")
		}
		if _, err := svc.RollUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var differ int
	if err := pool.QueryRow(ctx, fatigueDirect, f.ws).Scan(&differ); err != nil {
		t.Fatal(err)
	}
	if differ != 0 {
		t.Errorf("after folding, %d rows of call_days differ from the proposals' own counts", differ)
	}
	if err := pool.QueryRow(ctx, `SELECT sum(fast_approvals), sum(rejections) FROM call_days WHERE workspace_id = $1`, f.ws).Scan(&fast, &rejected); err != nil {
		t.Fatal(err)
	}
	// 96 calls, 12 of each kind: fast 0, 5 and 7; rejected 3 and 6.
	if fast != 36 || rejected != 24 {
		t.Errorf("after folding: %d fast approvals (want 36), %d rejections (want 24)", fast, rejected)
	}

	if err := m.To(46); err != nil {
		t.Fatalf("down: %v", err)
	}
}
