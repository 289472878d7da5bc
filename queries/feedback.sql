-- name: InsertFeedback :one
INSERT INTO feedback (workspace_id, submitted_by_user_id, submitted_by_token_id, submitted_by_kind, token_name,
    attempted_action, expected_outcome, actual_outcome, tool_called, tool_known, error_seen, severity, rationale, proposal_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING *;

-- name: ProposalOwnedBy :one
-- Whether a proposal is the caller's own (owner-scoped): 1 or no row.
SELECT 1 FROM proposals WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: ListFeedbackPage :many
-- One page of the triage list, newest first, older than the cursor's
-- (created_at, id) and no older than @since. The rows are read through
-- the index of the filter's lead (@lead: 'tool', 'status', 'severity', or
-- '' without one; the service picks it), the other filters checked on
-- that index's included columns, and at most @budget rows are read
-- (migration 36): a page stops at @page_limit rows or at its budget,
-- whichever comes first, and last_read marks the budget's last row so the
-- next page starts after it, matched or not. Only the lead's branch runs:
-- the others' @lead test is false before they read anything. The page's
-- items are then read by key, with the approval packet of their proposal.
WITH r AS (
    (SELECT x.id, x.created_at, true AS matched FROM feedback x
     WHERE sqlc.arg(lead)::text = '' AND x.workspace_id = sqlc.arg(workspace_id)
       AND x.created_at >= sqlc.arg(since) AND (x.created_at, x.id) < (sqlc.arg(before_at)::timestamptz, sqlc.arg(before_id)::uuid)
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
    UNION ALL
    (SELECT x.id, x.created_at,
            (sqlc.arg(severity)::text = '' OR x.severity = sqlc.arg(severity)) AND (sqlc.arg(status)::text = '' OR x.status = sqlc.arg(status))
     FROM feedback x
     WHERE sqlc.arg(lead) = 'tool' AND x.workspace_id = sqlc.arg(workspace_id) AND x.tool_called = sqlc.arg(tool)::text
       AND x.created_at >= sqlc.arg(since) AND (x.created_at, x.id) < (sqlc.arg(before_at), sqlc.arg(before_id))
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
    UNION ALL
    (SELECT x.id, x.created_at, sqlc.arg(severity) = '' OR x.severity = sqlc.arg(severity)
     FROM feedback x
     WHERE sqlc.arg(lead) = 'status' AND x.workspace_id = sqlc.arg(workspace_id) AND x.status = sqlc.arg(status)
       AND x.created_at >= sqlc.arg(since) AND (x.created_at, x.id) < (sqlc.arg(before_at), sqlc.arg(before_id))
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
    UNION ALL
    (SELECT x.id, x.created_at, true FROM feedback x
     WHERE sqlc.arg(lead) = 'severity' AND x.workspace_id = sqlc.arg(workspace_id) AND x.severity = sqlc.arg(severity)
       AND x.created_at >= sqlc.arg(since) AND (x.created_at, x.id) < (sqlc.arg(before_at), sqlc.arg(before_id))
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
)
SELECT sqlc.embed(f), a.id AS approval_id, p.matched::boolean AS matched, p.n = sqlc.arg(budget)::bigint AS last_read
FROM (
    SELECT q.id, q.created_at, q.matched, q.n FROM (
        SELECT r.id, r.created_at, r.matched, row_number() OVER (ORDER BY r.created_at DESC, r.id DESC) AS n FROM r
    ) q
    WHERE q.matched OR q.n = sqlc.arg(budget)
    ORDER BY q.created_at DESC, q.id DESC
    LIMIT sqlc.arg(page_limit)
) p
JOIN feedback f ON f.workspace_id = sqlc.arg(workspace_id) AND f.id = p.id
LEFT JOIN approvals a ON a.proposal_id = f.proposal_id AND a.workspace_id = f.workspace_id
ORDER BY p.created_at DESC, p.id DESC;

-- name: CountFeedback :many
-- The triage page's counts by tool and per week (Monday, UTC), in one
-- read: the newest @budget items of the window (through the same lead's
-- index as ListFeedbackPage, on its included columns alone), then the
-- filters. A 'tool' row per tool named, a 'week' row per week with an
-- item, and one 'total' row with how many rows were read and the oldest
-- of them: read = @budget means the counts stopped there and cover the
-- items from oldest on.
WITH r AS (
    (SELECT x.created_at, x.tool_called, x.tool_known, true AS matched FROM feedback x
     WHERE sqlc.arg(lead)::text = '' AND x.workspace_id = sqlc.arg(workspace_id) AND x.created_at >= sqlc.arg(since)
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
    UNION ALL
    (SELECT x.created_at, x.tool_called, x.tool_known,
            (sqlc.arg(severity)::text = '' OR x.severity = sqlc.arg(severity)) AND (sqlc.arg(status)::text = '' OR x.status = sqlc.arg(status))
     FROM feedback x
     WHERE sqlc.arg(lead) = 'tool' AND x.workspace_id = sqlc.arg(workspace_id) AND x.tool_called = sqlc.arg(tool)::text
       AND x.created_at >= sqlc.arg(since)
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
    UNION ALL
    (SELECT x.created_at, x.tool_called, x.tool_known, sqlc.arg(severity) = '' OR x.severity = sqlc.arg(severity)
     FROM feedback x
     WHERE sqlc.arg(lead) = 'status' AND x.workspace_id = sqlc.arg(workspace_id) AND x.status = sqlc.arg(status)
       AND x.created_at >= sqlc.arg(since)
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
    UNION ALL
    (SELECT x.created_at, x.tool_called, x.tool_known, true FROM feedback x
     WHERE sqlc.arg(lead) = 'severity' AND x.workspace_id = sqlc.arg(workspace_id) AND x.severity = sqlc.arg(severity)
       AND x.created_at >= sqlc.arg(since)
     ORDER BY x.created_at DESC, x.id DESC
     LIMIT sqlc.arg(budget))
)
SELECT (CASE GROUPING(w.tool_called, w.week) WHEN 1 THEN 'tool' WHEN 2 THEN 'week' ELSE 'total' END)::text AS kind,
       COALESCE(w.tool_called, '')::text AS tool_called, COALESCE(bool_or(w.tool_known), true)::boolean AS tool_known,
       COALESCE(w.week, 'epoch')::timestamptz AS week, (count(*) FILTER (WHERE w.matched))::bigint AS items,
       count(*)::bigint AS read, COALESCE(min(w.created_at), 'epoch')::timestamptz AS oldest
FROM (SELECT r.created_at, r.tool_called, r.tool_known, r.matched, date_trunc('week', r.created_at, 'UTC') AS week FROM r) w
GROUP BY GROUPING SETS ((w.tool_called), (w.week), ())
HAVING count(*) FILTER (WHERE w.matched) > 0 OR GROUPING(w.tool_called, w.week) = 3;

-- name: GetFeedback :one
SELECT sqlc.embed(f), a.id AS approval_id FROM feedback f
LEFT JOIN approvals a ON a.proposal_id = f.proposal_id AND a.workspace_id = f.workspace_id
WHERE f.id = $1 AND f.workspace_id = $2;

-- name: GetFeedbackForUpdate :one
SELECT sqlc.embed(f), a.id AS approval_id FROM feedback f
LEFT JOIN approvals a ON a.proposal_id = f.proposal_id AND a.workspace_id = f.workspace_id
WHERE f.id = $1 AND f.workspace_id = $2
FOR UPDATE OF f;

-- name: SetFeedbackStatus :one
UPDATE feedback SET status = $3, admin_note = $4, updated_at = now()
WHERE id = $1 AND workspace_id = $2
RETURNING *;
