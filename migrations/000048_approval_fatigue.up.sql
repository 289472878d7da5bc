-- Approval-fatigue numbers on /trust (issue 27 item 5; ADR-036's reversal
-- criterion: calls "unanimously approved within 5 min"), read from the
-- calls' days the roll-up already keeps (migration 30), never from
-- history (issue 32).
--
-- call_days already counts, per workspace, UTC day, action class and
-- tool, the calls a person decided (decisions) and a log-scale histogram
-- of the seconds to each decision (decision_hist: the median). It gains:
-- - fast_approvals: decided calls a person approved (an owner's confirm
--   or an approval packet, not a rejection) as proposed (no edit:
--   applied_arguments is NULL) within 5 minutes of the proposal;
-- - rejections: decided calls a person rejected.
-- Approvals are decisions - rejections. Calls run by the automatic path
-- or under a grant are not decided by a person (apply_path 'auto'), as
-- before. The 5 minutes are exact, not a histogram bucket's edge.
--
-- call_days_open remembers the two facts as counted for each unfinished
-- call, as it does the others, so that the roll-up adds the difference
-- when the call changes.

-- Backfilled from the rows as they are: nothing writes them meanwhile.
LOCK TABLE proposals, audit_events IN SHARE MODE;

ALTER TABLE call_days
    ADD COLUMN fast_approvals bigint NOT NULL DEFAULT 0,
    ADD COLUMN rejections     bigint NOT NULL DEFAULT 0;

ALTER TABLE call_days_open
    ADD COLUMN fast_approval boolean NOT NULL DEFAULT false,
    ADD COLUMN rejected      boolean NOT NULL DEFAULT false;

-- The view gains the two facts (new columns go last).
CREATE OR REPLACE VIEW proposal_call_facts AS
SELECT id, workspace_id, (created_at AT TIME ZONE 'UTC')::date AS day, coalesce(action_class, '')::text AS action_class, tool,
       status IN ('pending', 'pending_approval', 'applying') AS open,
       status IN ('rejected', 'failed')                      AS refused,
       applied_arguments IS NOT NULL                         AS edited,
       (action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND (apply_path IN ('human', 'approval') OR status = 'rejected')
            AND coalesce(claimed_at, resolved_at) IS NOT NULL) AS decided,
       gatehouse_decision_bucket(extract(epoch FROM coalesce(claimed_at, resolved_at) - created_at)::double precision) AS decision_bucket,
       (action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND apply_path IN ('human', 'approval') AND status <> 'rejected'
            AND applied_arguments IS NULL AND claimed_at IS NOT NULL
            AND claimed_at - created_at <= interval '5 minutes') AS fast_approval,
       (action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND status = 'rejected'
            AND resolved_at IS NOT NULL) AS rejected
FROM proposals;

-- The backfill. A call the roll-up has counted and that is finished is in
-- call_days as it is now: its facts are added on its counted day. A call
-- counted as unfinished (call_days_open) was counted as it was then: it
-- counts as a fast approval only if it was decided then (once claimed, a
-- call's claim time and arguments never change), and as a rejection never
-- (a rejected call is finished); the roll-up adds the rest when its change
-- is folded. A call the roll-up has not counted yet (its proposal.created
-- audit row is after the watermark) is counted whole when folded.
UPDATE call_days_open o SET fast_approval = true
FROM proposal_call_facts f
WHERE f.id = o.proposal_id AND o.decided AND f.fast_approval;

WITH w AS (SELECT folded_to FROM rollup_feeds WHERE feed = 'audit_events'),
counted AS (
    SELECT a.workspace_id, a.subject_id
    FROM audit_events a, w
    WHERE a.action = 'proposal.created' AND a.subject_type = 'proposal' AND a.id <= w.folded_to
),
finished AS (
    SELECT f.workspace_id, f.day, f.action_class, f.tool, f.fast_approval, f.rejected
    FROM proposal_call_facts f
    JOIN counted c ON c.subject_id = f.id::text AND c.workspace_id = f.workspace_id
    WHERE (f.fast_approval OR f.rejected) AND NOT EXISTS (SELECT 1 FROM call_days_open o WHERE o.proposal_id = f.id)
),
facts AS (
    SELECT workspace_id, day, action_class, tool, fast_approval::int AS fast, rejected::int AS rejected FROM finished
    UNION ALL
    SELECT workspace_id, day, action_class, tool, 1, 0 FROM call_days_open WHERE fast_approval
)
INSERT INTO call_days AS d (workspace_id, day, action_class, tool, fast_approvals, rejections)
SELECT workspace_id, day, action_class, tool, sum(fast), sum(rejected)
FROM facts
GROUP BY workspace_id, day, action_class, tool
ON CONFLICT (workspace_id, day, action_class, tool) DO UPDATE
    SET fast_approvals = d.fast_approvals + EXCLUDED.fast_approvals, rejections = d.rejections + EXCLUDED.rejections;
