-- The intent view and the calls' roll-up (internal/intent): call_days
-- holds each day's calls per action class and tool, folded from the audit
-- log (every call writes its proposal.created or proposal.refused row, or,
-- when it ran at once, one proposal.applied or proposal.failed row that
-- says what the created row would have (its data has "scope"), and every
-- change of a call an audit row naming it or its approval packet).

-- name: CallDays :many
-- The folded counts of a workspace's days in [from_day, to_day) (without
-- the histograms: CallDecisions).
SELECT day, action_class, tool, calls, refused, edited, warned, decisions, fast_approvals, rejections
FROM call_days
WHERE workspace_id = @workspace_id AND day >= @from_day AND day < @to_day;

-- name: CallDecisions :many
-- The folded decisions of a workspace's days in [from_day, to_day), per
-- action class and bucket of their seconds (gatehouse_decision_bucket):
-- the days' histograms added up in the database, a few rows per class.
SELECT d.action_class, (h.i - 1)::int AS bucket, sum(h.n)::bigint AS decisions
FROM call_days d, unnest(d.decision_hist) WITH ORDINALITY AS h (n, i)
WHERE d.workspace_id = @workspace_id AND d.day >= @from_day AND d.day < @to_day AND d.decisions <> 0 AND d.action_class <> '' AND h.n <> 0
GROUP BY d.action_class, h.i;

-- name: CallFatigue :many
-- The folded decisions of a workspace's days in [from_day, to_day), per
-- action class and tool (the approval-fatigue numbers on /trust): how
-- many a person decided, approved as proposed within 5 minutes, and
-- rejected, and the histogram of their seconds added up in the database.
SELECT d.action_class, d.tool, sum(d.decisions)::bigint AS decisions, sum(d.fast_approvals)::bigint AS fast_approvals,
       sum(d.rejections)::bigint AS rejections, gatehouse_hist_sum(d.decision_hist)::int[] AS hist
FROM call_days d
WHERE d.workspace_id = @workspace_id AND d.day >= @from_day AND d.day < @to_day AND d.decisions <> 0 AND d.action_class <> ''
GROUP BY d.action_class, d.tool;

-- name: SetPagePlanning :exec
-- For the rest of a page's transaction. Its statements read a bounded
-- number of rows, through the indexes their generic plans use (the plan
-- tests check them), so: no JIT (a LATERAL over owners is estimated high
-- enough to be compiled, which costs tens of milliseconds and saves
-- nothing), and the generic plan at once (planning the tail's statement
-- for its values again at each read costs more than running it).
SELECT set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: AuditHead :one
-- The largest audit row id visible: the roll-up's next watermark.
SELECT coalesce(max(id), 0)::bigint FROM audit_events;

-- name: AuditBatchEnd :one
-- Where a batch of audit rows after after ends (of a workspace, or of all
-- when workspace_id is null): the id of the max_rows-th row, or upto when
-- there are fewer.
SELECT coalesce((SELECT a.id FROM audit_events a
                 WHERE a.id > @after AND a.id <= @upto AND (sqlc.narg(workspace_id)::uuid IS NULL OR a.workspace_id = sqlc.narg(workspace_id))
                 ORDER BY a.id OFFSET sqlc.arg(max_rows)::int - 1 LIMIT 1), @upto)::bigint;

-- name: CallEvents :many
-- The audit rows with ids in (after, upto] (of a workspace, or of all)
-- that change a count: a call created, a call refused at the gate, and
-- anything about a call that call_days_open counts as not finished. Each
-- comes with the call as it is now (found: it still exists) and as it
-- was counted (counted: it is in call_days_open).
WITH s AS MATERIALIZED ( -- each row's call, worked out once
    SELECT r.id, r.workspace_id, r.action, r.data_class, r.data_tool, r.warning, r.created_at,
           CASE r.subject_type WHEN 'proposal' THEN r.subject_uuid
                               WHEN 'approval' THEN (SELECT ap.proposal_id FROM approvals ap WHERE ap.id = r.subject_uuid) END AS proposal_id
    FROM (
        -- A uuid as the service writes them (so the cast cannot fail: 32
        -- hex digits in fours with four hyphens), checked without counted
        -- repetitions, which make PostgreSQL's regex several times slower.
        -- A call that ran at once has one row: it is the call's created row.
        SELECT a.id, a.workspace_id,
               CASE WHEN a.action IN ('proposal.applied', 'proposal.failed') AND a.data ? 'scope' THEN 'proposal.created' ELSE a.action::text END AS action,
               a.subject_type, a.created_at,
               coalesce(a.data->>'action_class', '') AS data_class, coalesce(a.data->>'tool', '') AS data_tool,
               coalesce(a.data->'rationale_warning' = 'true'::jsonb, false) AS warning,
               CASE WHEN a.subject_type IN ('proposal', 'approval') AND octet_length(a.subject_id) = 36 AND strpos(a.subject_id, '-') > 0
                         AND a.subject_id ~ '^([0-9a-f][0-9a-f][0-9a-f][0-9a-f]-?)*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]$'
                    THEN a.subject_id::uuid END AS subject_uuid
        FROM audit_events a
        WHERE a.id > @after AND a.id <= @upto AND (sqlc.narg(workspace_id)::uuid IS NULL OR a.workspace_id = sqlc.narg(workspace_id))
    ) r
), m AS MATERIALIZED ( -- the rows that change a count, with what was counted
    SELECT s.id, s.workspace_id, s.action, s.data_class, s.data_tool, s.warning, s.created_at, s.proposal_id,
           o.proposal_id AS counted_id, o.day AS counted_day, o.action_class AS counted_class, o.tool AS counted_tool,
           o.refused AS counted_refused, o.edited AS counted_edited, o.decided AS counted_decided, o.decision_bucket AS counted_bucket,
           o.fast_approval AS counted_fast_approval, o.rejected AS counted_rejected
    FROM s
    -- Each by its key (LIMIT 1 keeps it per row), never a join over every
    -- unfinished call.
    LEFT JOIN LATERAL (SELECT * FROM call_days_open co WHERE co.proposal_id = s.proposal_id LIMIT 1) o ON true
    WHERE s.action IN ('proposal.created', 'proposal.refused') OR o.proposal_id IS NOT NULL
)
SELECT m.id, m.workspace_id, m.action, m.created_at,
       m.data_class::text AS data_class, m.data_tool::text AS data_tool, m.warning::boolean AS warning,
       coalesce(m.proposal_id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS proposal_id,
       (f.id IS NOT NULL)::boolean AS found, coalesce(f.day, (m.created_at AT TIME ZONE 'UTC')::date)::date AS day, coalesce(f.action_class, '')::text AS action_class,
       coalesce(f.tool, '')::text AS tool, coalesce(f.open, false)::boolean AS open, coalesce(f.refused, false)::boolean AS refused,
       coalesce(f.edited, false)::boolean AS edited, coalesce(f.decided, false)::boolean AS decided, coalesce(f.decision_bucket, 0)::int AS decision_bucket,
       (m.counted_id IS NOT NULL)::boolean AS counted, coalesce(m.counted_day, (m.created_at AT TIME ZONE 'UTC')::date)::date AS counted_day,
       coalesce(m.counted_class, '')::text AS counted_class, coalesce(m.counted_tool, '')::text AS counted_tool,
       coalesce(m.counted_refused, false)::boolean AS counted_refused, coalesce(m.counted_edited, false)::boolean AS counted_edited,
       coalesce(m.counted_decided, false)::boolean AS counted_decided, coalesce(m.counted_bucket, 0)::int AS counted_bucket,
       coalesce(f.fast_approval, false)::boolean AS fast_approval, coalesce(f.rejected, false)::boolean AS rejected,
       coalesce(m.counted_fast_approval, false)::boolean AS counted_fast_approval, coalesce(m.counted_rejected, false)::boolean AS counted_rejected
FROM m
-- The call as it is now, by its key.
LEFT JOIN LATERAL (SELECT * FROM proposal_call_facts pf WHERE pf.id = m.proposal_id LIMIT 1) f ON true
ORDER BY m.id;

-- name: OpenCallsAfter :many
-- The roll-up's sweep: calls counted as not finished, a page at a time,
-- with the call as it is now (found: it still exists).
SELECT o.proposal_id, o.workspace_id, o.day, o.action_class, o.tool, o.refused, o.edited, o.decided, o.decision_bucket,
       o.fast_approval, o.rejected,
       (f.id IS NOT NULL)::boolean AS found, coalesce(f.open, false)::boolean AS now_open, coalesce(f.refused, false)::boolean AS now_refused,
       coalesce(f.edited, false)::boolean AS now_edited, coalesce(f.decided, false)::boolean AS now_decided,
       coalesce(f.decision_bucket, 0)::int AS now_bucket, coalesce(f.fast_approval, false)::boolean AS now_fast_approval,
       coalesce(f.rejected, false)::boolean AS now_rejected
FROM call_days_open o
LEFT JOIN LATERAL (SELECT * FROM proposal_call_facts pf WHERE pf.id = o.proposal_id LIMIT 1) f ON true
WHERE o.proposal_id > @after
ORDER BY o.proposal_id
LIMIT sqlc.arg(max_rows)::int;

-- name: AddCallDays :exec
-- Adds counts (which may be negative: a call counted before changed) to
-- days, one statement for a batch's days; each histogram comes as the
-- text of an int array.
INSERT INTO call_days AS d (workspace_id, day, action_class, tool, calls, refused, edited, warned, decisions, decision_hist,
                            fast_approvals, rejections)
SELECT u.workspace_id, u.day, u.action_class, u.tool, u.calls, u.refused, u.edited, u.warned, u.decisions, u.hist::int[],
       u.fast_approvals, u.rejections
FROM (
    SELECT unnest(sqlc.arg(workspace_ids)::uuid[]) AS workspace_id, unnest(sqlc.arg(days)::date[]) AS day,
           unnest(sqlc.arg(classes)::text[]) AS action_class, unnest(sqlc.arg(tools)::text[]) AS tool,
           unnest(sqlc.arg(calls)::bigint[]) AS calls, unnest(sqlc.arg(refused)::bigint[]) AS refused, unnest(sqlc.arg(edited)::bigint[]) AS edited,
           unnest(sqlc.arg(warned)::bigint[]) AS warned, unnest(sqlc.arg(decisions)::bigint[]) AS decisions, unnest(sqlc.arg(hists)::text[]) AS hist,
           unnest(sqlc.arg(fast_approvals)::bigint[]) AS fast_approvals, unnest(sqlc.arg(rejections)::bigint[]) AS rejections
) u
ON CONFLICT (workspace_id, day, action_class, tool) DO UPDATE
    SET calls = d.calls + EXCLUDED.calls, refused = d.refused + EXCLUDED.refused, edited = d.edited + EXCLUDED.edited,
        warned = d.warned + EXCLUDED.warned, decisions = d.decisions + EXCLUDED.decisions,
        decision_hist = gatehouse_hist_add(d.decision_hist, EXCLUDED.decision_hist),
        fast_approvals = d.fast_approvals + EXCLUDED.fast_approvals, rejections = d.rejections + EXCLUDED.rejections;

-- name: PutOpenCalls :exec
-- Remembers what was counted for calls not finished yet.
INSERT INTO call_days_open (proposal_id, workspace_id, day, action_class, tool, refused, edited, decided, decision_bucket, fast_approval, rejected)
SELECT unnest(sqlc.arg(proposal_ids)::uuid[]), unnest(sqlc.arg(workspace_ids)::uuid[]), unnest(sqlc.arg(days)::date[]),
       unnest(sqlc.arg(classes)::text[]), unnest(sqlc.arg(tools)::text[]), unnest(sqlc.arg(refused)::boolean[]),
       unnest(sqlc.arg(edited)::boolean[]), unnest(sqlc.arg(decided)::boolean[]), unnest(sqlc.arg(buckets)::int[]),
       unnest(sqlc.arg(fast_approvals)::boolean[]), unnest(sqlc.arg(rejected)::boolean[])
ON CONFLICT (proposal_id) DO UPDATE
    SET refused = EXCLUDED.refused, edited = EXCLUDED.edited, decided = EXCLUDED.decided, decision_bucket = EXCLUDED.decision_bucket,
        fast_approval = EXCLUDED.fast_approval, rejected = EXCLUDED.rejected;

-- name: DeleteOpenCalls :exec
DELETE FROM call_days_open WHERE proposal_id = ANY (sqlc.arg(proposal_ids)::uuid[]);

-- name: IntentCalls :many
-- A period's latest calls, newest first: the newest max_rows calls of each
-- owner (proposals_owner_time_idx; the owners found by skipping through
-- the same index) and of the calls refused at the gate
-- (audit_events_refused_idx), merged: a bounded read however many calls
-- the period holds.
WITH RECURSIVE owners AS (
    (SELECT p.owner_id FROM proposals p WHERE p.workspace_id = @workspace_id ORDER BY p.owner_id LIMIT 1)
    UNION ALL
    SELECT (SELECT p.owner_id FROM proposals p WHERE p.workspace_id = @workspace_id AND p.owner_id > o.owner_id ORDER BY p.owner_id LIMIT 1)
    FROM owners o WHERE o.owner_id IS NOT NULL
), calls AS (
    SELECT c.call_id, c.tool, c.action_class, c.rationale, c.status, c.edited, c.created_at FROM owners o CROSS JOIN LATERAL (
        SELECT p.id::text AS call_id, p.tool::text AS tool, coalesce(p.action_class, '')::text AS action_class, p.rationale::text AS rationale,
               p.status::text AS status, (p.applied_arguments IS NOT NULL)::boolean AS edited, p.created_at
        FROM proposals p
        WHERE p.workspace_id = @workspace_id AND p.owner_id = o.owner_id AND p.created_at >= @since AND p.created_at < @until
        ORDER BY p.created_at DESC
        LIMIT sqlc.arg(max_rows)::int
    ) c
    WHERE o.owner_id IS NOT NULL
    UNION ALL
    SELECT r.call_id, r.tool, r.action_class, r.rationale, r.status, r.edited, r.created_at FROM (
        SELECT a.id::text AS call_id, coalesce(a.data->>'tool', '')::text AS tool, coalesce(a.data->>'action_class', '')::text AS action_class,
               coalesce(a.data->>'rationale', '')::text AS rationale, 'refused'::text AS status, false AS edited, a.created_at
        FROM audit_events a
        WHERE a.workspace_id = @workspace_id AND a.action = 'proposal.refused' AND a.created_at >= @since AND a.created_at < @until
        ORDER BY a.created_at DESC
        LIMIT sqlc.arg(max_rows)::int
    ) r
)
SELECT call_id, tool, action_class, rationale, status, edited, created_at
FROM calls
ORDER BY created_at DESC
LIMIT sqlc.arg(max_rows)::int;

-- name: IntentWordMatches :many
-- A period's calls whose rationale matches q (websearch syntax), among the
-- newest per_source calls of each owner and of the calls refused at the
-- gate (read as IntentCalls reads them): full-text matching has no order,
-- so a search for words reads a bounded number of the latest calls. Every
-- match, newest first, with its rationale only among the first listed;
-- fullest is the most calls read from one source (an owner, or the gate):
-- when it is per_source, older calls of the period were not read. One row
-- at least (no call_id when nothing matches).
WITH RECURSIVE owners AS (
    (SELECT p.owner_id FROM proposals p WHERE p.workspace_id = @workspace_id ORDER BY p.owner_id LIMIT 1)
    UNION ALL
    SELECT (SELECT p.owner_id FROM proposals p WHERE p.workspace_id = @workspace_id AND p.owner_id > o.owner_id ORDER BY p.owner_id LIMIT 1)
    FROM owners o WHERE o.owner_id IS NOT NULL
), calls AS (
    SELECT o.owner_id::text AS source, c.call_id, c.tool, c.action_class, c.rationale, c.status, c.refused, c.edited, c.created_at
    FROM owners o CROSS JOIN LATERAL (
        SELECT p.id::text AS call_id, p.tool::text AS tool, coalesce(p.action_class, '')::text AS action_class, p.rationale::text AS rationale,
               p.status::text AS status, (p.status IN ('rejected', 'failed'))::boolean AS refused, (p.applied_arguments IS NOT NULL)::boolean AS edited,
               p.created_at
        FROM proposals p
        WHERE p.workspace_id = @workspace_id AND p.owner_id = o.owner_id AND p.created_at >= @since AND p.created_at < @until
        ORDER BY p.created_at DESC
        LIMIT sqlc.arg(per_source)::int
    ) c
    WHERE o.owner_id IS NOT NULL
    UNION ALL
    SELECT 'gate', r.call_id, r.tool, r.action_class, r.rationale, r.status, r.refused, r.edited, r.created_at FROM (
        SELECT a.id::text AS call_id, coalesce(a.data->>'tool', '')::text AS tool, coalesce(a.data->>'action_class', '')::text AS action_class,
               coalesce(a.data->>'rationale', '')::text AS rationale, 'refused'::text AS status, true AS refused, false AS edited, a.created_at
        FROM audit_events a
        WHERE a.workspace_id = @workspace_id AND a.action = 'proposal.refused' AND a.created_at >= @since AND a.created_at < @until
        ORDER BY a.created_at DESC
        LIMIT sqlc.arg(per_source)::int
    ) r
), matched AS (
    SELECT c.call_id, c.tool, c.action_class, c.rationale, c.status, c.refused, c.edited, c.created_at,
           row_number() OVER (ORDER BY c.created_at DESC, c.call_id) AS rank
    FROM calls c
    WHERE to_tsvector('simple', c.rationale) @@ websearch_to_tsquery('simple', @q::text)
)
SELECT coalesce(m.call_id, '')::text AS call_id, coalesce(m.tool, '')::text AS tool, coalesce(m.action_class, '')::text AS action_class,
       (CASE WHEN m.rank <= sqlc.arg(listed)::int THEN m.rationale ELSE '' END)::text AS rationale, coalesce(m.status, '')::text AS status,
       coalesce(m.refused, false)::boolean AS refused, coalesce(m.edited, false)::boolean AS edited,
       coalesce(m.created_at, now())::timestamptz AS created_at, s.fullest::int AS fullest
FROM (SELECT coalesce(max(n), 0) AS fullest FROM (SELECT count(*) AS n FROM calls GROUP BY source) x) s
LEFT JOIN matched m ON true
ORDER BY m.rank;
