-- name: InsertApproval :one
INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, requires_witness, constraints, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING *;

-- name: GetApproval :one
SELECT * FROM approvals WHERE id = $1 AND workspace_id = $2;

-- name: GetApprovalForProposal :one
SELECT * FROM approvals WHERE proposal_id = $1;

-- name: ListApprovals :many
-- The queue: filtered by status, tool, action class and risk (empty = any),
-- soonest expiry first for pending packets, newest first otherwise.
SELECT a.*, p.tool, p.action_class, p.risk, p.arguments, p.rationale, p.conversation_id, p.notebook_id,
       p.proposed_by_kind, u.email AS proposer_email
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id
JOIN users u ON u.id = p.proposed_by_user_id
WHERE a.workspace_id = sqlc.arg(workspace_id)
  AND (sqlc.arg(status)::text = '' OR a.status = sqlc.arg(status))
  AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
  AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class))
  AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))
ORDER BY CASE WHEN a.status = 'pending' THEN a.expires_at END ASC, a.created_at DESC
LIMIT 200;

-- name: AddApprovalVote :execrows
INSERT INTO approval_votes (approval_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING;

-- name: ListApprovalVoters :many
SELECT user_id FROM approval_votes WHERE approval_id = $1 ORDER BY created_at;

-- name: ResolveApproval :one
-- pending → approved | rejected: of concurrent approvers exactly one wins.
UPDATE approvals SET status = sqlc.arg(status), constraints = sqlc.arg(constraints), rejection_reason = sqlc.arg(rejection_reason),
       resolved_by = sqlc.arg(resolved_by), resolved_at = now()
WHERE id = sqlc.arg(id) AND status = 'pending' AND expires_at > now()
RETURNING *;

-- name: ExpireApprovals :many
-- The sweeper: pending packets past their expiry become expired, and so do
-- their proposals.
WITH expired AS (
    UPDATE approvals SET status = 'expired', resolved_at = now()
    WHERE status = 'pending' AND expires_at <= now()
    RETURNING id, proposal_id, workspace_id
)
UPDATE proposals p SET status = 'expired', resolved_at = now()
FROM expired e
WHERE p.id = e.proposal_id AND p.status = 'pending_approval'
RETURNING p.id, p.workspace_id, e.id AS approval_id;

-- name: CountPendingApprovals :one
SELECT count(*) FROM approvals WHERE workspace_id = $1 AND status = 'pending' AND expires_at > now();

-- name: GetApprovalDetail :one
SELECT a.*, p.tool, p.action_class, p.risk, p.arguments, p.rationale, p.conversation_id, p.notebook_id,
       p.proposed_by_kind, u.email AS proposer_email, p.proposed_by_user_id, p.decision, p.status AS proposal_status,
       p.result, p.error
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id
JOIN users u ON u.id = p.proposed_by_user_id
WHERE a.id = $1 AND a.workspace_id = $2;

-- name: ListSimilarProposals :many
-- The history of similar calls: the same tool in the workspace, newest first.
SELECT id, status, arguments, created_at, resolved_at, apply_path FROM proposals
WHERE workspace_id = $1 AND tool = $2 AND id <> $3
ORDER BY created_at DESC LIMIT 10;

-- name: Notify :exec
-- Tells every instance's live pages that something changed (delivered at
-- commit).
SELECT pg_notify('gatehouse_events', sqlc.arg(payload)::text);
