-- name: InsertFeedback :one
INSERT INTO feedback (workspace_id, submitted_by_user_id, submitted_by_token_id, submitted_by_kind, token_name,
    attempted_action, expected_outcome, actual_outcome, tool_called, tool_known, error_seen, severity, rationale, proposal_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING *;

-- name: ProposalOwnedBy :one
-- Whether a proposal is the caller's own (owner-scoped): 1 or no row.
SELECT 1 FROM proposals WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: ListFeedback :many
-- A workspace's feedback, newest first, filtered (empty filters match
-- all), with the approval packet of its proposal if it has one.
SELECT sqlc.embed(f), a.id AS approval_id FROM feedback f
LEFT JOIN approvals a ON a.proposal_id = f.proposal_id AND a.workspace_id = f.workspace_id
WHERE f.workspace_id = @workspace_id
  AND f.created_at >= @since
  AND (@severity::text = '' OR f.severity = @severity)
  AND (@tool::text = '' OR f.tool_called = @tool)
  AND (@status::text = '' OR f.status = @status)
ORDER BY f.created_at DESC, f.id DESC
LIMIT @max_rows;

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
