package db_test

import (
	"context"
	"testing"
)

// Migration 30 fills the aggregates from the rows a database already has:
// evidence_totals, call_days (with each decision in its bucket) and the
// unfinished calls equal what the rows themselves give, and the feeds
// start after the last rows.
func TestRollupsMigration_BackfillMatchesTheRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, pool := atVersion(t, ctx, 29)
	f := newCallFixture(t, ctx, pool, "backfill")
	fillHistory(t, ctx, pool, f, 3000)
	// Calls warned about their rationale, edited, and waiting for an approver.
	if _, err := pool.Exec(ctx, `
		WITH p AS (
			INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
			                       rationale, permission_mode, disposition, status, applied_arguments, created_at)
			SELECT $1, $2, $3, $2, 'agent', 'email.send', 'mutate', '{}', 'short', 'approve', 'propose', 'pending_approval', '{"to": "x"}',
			       now() - i * interval '7 hours'
			FROM generate_series(1, 40) i
			RETURNING id, created_at
		)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at)
		SELECT $1, 'agent', 'proposal.created', 'proposal', p.id::text, '{"tool": "email.send", "rationale_warning": true}', p.created_at FROM p`,
		f.ws, f.user, f.conv); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ name, sql string }{
		{"evidence_totals", `
			WITH direct AS (
				SELECT workspace_id, action_class,
				       coalesce(sum(weight::numeric) FILTER (WHERE weight > 0), 0) AS positive, coalesce(sum(-weight::numeric) FILTER (WHERE weight < 0), 0) AS negative,
				       count(*) FILTER (WHERE weight <> 0) AS samples, count(*) AS rows,
				       count(*) FILTER (WHERE provenance IN ('receipt', 'principal') AND label IN ('approved', 'minor_edit')) AS judged_approvals,
				       count(*) FILTER (WHERE provenance IN ('receipt', 'principal') AND label IN ('approved', 'minor_edit', 'edited', 'heavy_rewrite', 'rejected')) AS judgments,
				       count(*) FILTER (WHERE label IN ('approved', 'sent')) AS approvals, count(*) FILTER (WHERE label IN ('minor_edit', 'edited', 'heavy_rewrite')) AS edits,
				       count(*) FILTER (WHERE label IN ('rejected', 'dropped', 'violation')) AS rejections
				FROM evidence GROUP BY 1, 2
			), kept AS (
				SELECT workspace_id, action_class, positive, negative, samples, rows, judged_approvals, judgments, approvals, edits, rejections FROM evidence_totals
			)
			SELECT count(*) FROM ((SELECT * FROM direct EXCEPT SELECT * FROM kept) UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM direct)) x`},
		{"call_days", `
			WITH direct AS (
				SELECT workspace_id, (created_at AT TIME ZONE 'UTC')::date AS day, coalesce(action_class, '') AS action_class, tool::text AS tool,
				       count(*) AS calls, count(*) FILTER (WHERE status IN ('rejected', 'failed')) AS refused,
				       count(*) FILTER (WHERE applied_arguments IS NOT NULL) AS edited,
				       count(*) FILTER (WHERE action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND (apply_path IN ('human', 'approval') OR status = 'rejected')
				                          AND coalesce(claimed_at, resolved_at) IS NOT NULL) AS decisions
				FROM proposals GROUP BY 1, 2, 3, 4
				UNION ALL
				SELECT workspace_id, (created_at AT TIME ZONE 'UTC')::date, coalesce(data->>'action_class', ''), coalesce(data->>'tool', ''), count(*), count(*), 0, 0
				FROM audit_events WHERE action = 'proposal.refused' GROUP BY 1, 2, 3, 4
			), direct_sum AS (
				SELECT workspace_id, day, action_class, tool, sum(calls) AS calls, sum(refused) AS refused, sum(edited) AS edited, sum(decisions) AS decisions
				FROM direct GROUP BY 1, 2, 3, 4
			), kept AS (
				SELECT workspace_id, day, action_class, tool, sum(calls) AS calls, sum(refused) AS refused, sum(edited) AS edited, sum(decisions) AS decisions
				FROM call_days WHERE calls > 0 OR decisions > 0 GROUP BY 1, 2, 3, 4
			)
			SELECT count(*) FROM ((SELECT * FROM direct_sum EXCEPT SELECT * FROM kept) UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM direct_sum)) x`},
		{"decision histograms", `
			WITH direct AS (
				SELECT workspace_id, (created_at AT TIME ZONE 'UTC')::date AS day, action_class::text AS action_class, tool::text AS tool,
				       gatehouse_decision_bucket(extract(epoch FROM coalesce(claimed_at, resolved_at) - created_at)::float8) AS bucket, count(*) AS n
				FROM proposals
				WHERE action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND (apply_path IN ('human', 'approval') OR status = 'rejected')
				  AND coalesce(claimed_at, resolved_at) IS NOT NULL
				GROUP BY 1, 2, 3, 4, 5
			), kept AS (
				SELECT d.workspace_id, d.day, d.action_class, d.tool, (h.i - 1)::int AS bucket, h.n::bigint AS n
				FROM call_days d, unnest(d.decision_hist) WITH ORDINALITY AS h (n, i) WHERE h.n <> 0
			)
			SELECT count(*) FROM ((SELECT * FROM direct EXCEPT SELECT * FROM kept) UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM direct)) x`},
		{"rationale warnings", `
			WITH direct AS (
				SELECT workspace_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS warned FROM audit_events
				WHERE action IN ('proposal.created', 'proposal.refused') AND (data->>'rationale_warning')::boolean GROUP BY 1, 2
			), kept AS (
				SELECT workspace_id, day, sum(warned) AS warned FROM call_days WHERE warned > 0 GROUP BY 1, 2
			)
			SELECT count(*) FROM ((SELECT * FROM direct EXCEPT SELECT * FROM kept) UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM direct)) x`},
		{"unfinished calls", `
			SELECT count(*) FROM (
				(SELECT id FROM proposals WHERE status IN ('pending', 'pending_approval', 'applying') EXCEPT SELECT proposal_id FROM call_days_open)
				UNION ALL
				(SELECT proposal_id FROM call_days_open EXCEPT SELECT id FROM proposals WHERE status IN ('pending', 'pending_approval', 'applying'))) x`},
		{"watermarks", `
			SELECT count(*) FROM rollup_feeds
			WHERE feed IN ('evidence', 'audit_events') AND NOT (feed = 'evidence' AND folded_to = (SELECT max(id) FROM evidence) OR feed = 'audit_events' AND folded_to = (SELECT max(id) FROM audit_events))`},
	} {
		var differ int
		if err := pool.QueryRow(ctx, c.sql).Scan(&differ); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if differ != 0 {
			t.Errorf("%s: %d rows differ from the rows' own counts", c.name, differ)
		}
	}
	// Something was counted at all.
	var calls, decisions, warned, open int64
	if err := pool.QueryRow(ctx, `SELECT sum(calls), sum(decisions), sum(warned), (SELECT count(*) FROM call_days_open) FROM call_days`).
		Scan(&calls, &decisions, &warned, &open); err != nil || calls < 3000 || decisions == 0 || warned != 40 || open == 0 {
		t.Fatalf("backfilled %d calls, %d decisions, %d warnings, %d unfinished (%v)", calls, decisions, warned, open, err)
	}
}
