-- name: InsertApproval :one
INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, requires_witness, constraints, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING *;

-- name: GetApproval :one
SELECT * FROM approvals WHERE id = $1 AND workspace_id = $2;

-- name: GetApprovalForUpdate :one
-- Resolving a packet locks it: votes, the resolution and the call's claim
-- happen in one transaction, so the packet and its proposal move together.
SELECT * FROM approvals WHERE id = $1 AND workspace_id = $2 FOR UPDATE;

-- name: RequireWitness :exec
-- An approver asked for a second pair of eyes.
UPDATE approvals SET requires_witness = true WHERE id = $1;

-- name: GetApprovalForProposal :one
SELECT * FROM approvals WHERE proposal_id = $1;

-- name: ListApprovals :many
-- The queue: filtered by status, tool, action class and risk (empty = any),
-- soonest expiry first for pending packets, newest first otherwise. Each
-- row carries what the inbox shows without another query: the agent
-- token's name, the origin's title, the votes so far and who decided.
SELECT a.*, p.tool, p.action_class, p.risk, p.effect, p.arguments, p.rationale, p.conversation_id, p.notebook_id,
       p.proposed_by_kind, u.email AS proposer_email, t.name AS token_name,
       COALESCE(c.title, n.title, '') AS origin_title, r.email AS resolver_email,
       (SELECT count(*) FROM approval_votes v WHERE v.approval_id = a.id) AS votes
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id
JOIN users u ON u.id = p.proposed_by_user_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
LEFT JOIN users r ON r.id = a.resolved_by
WHERE a.workspace_id = sqlc.arg(workspace_id)
  AND a.approver_role = ANY (sqlc.arg(roles)::text[])
  AND (sqlc.arg(status)::text = '' OR a.status = sqlc.arg(status))
  AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
  AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class))
  AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))
ORDER BY CASE WHEN a.status = 'pending' THEN a.expires_at END ASC, a.created_at DESC, a.id
LIMIT 200;

-- name: CountApprovals :one
-- The inbox's filter bar, in one query: each status's count under the
-- other filters (tool, action class, risk), and each risk's count under
-- the status, tool and action class filters.
SELECT
    count(*) FILTER (WHERE a.status = 'pending' AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) AS pending,
    count(*) FILTER (WHERE a.status = 'approved' AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) AS approved,
    count(*) FILTER (WHERE a.status = 'rejected' AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) AS rejected,
    count(*) FILTER (WHERE a.status = 'expired' AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) AS expired,
    count(*) FILTER (WHERE sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk)) AS any_status,
    count(*) FILTER (WHERE (sqlc.arg(status)::text = '' OR a.status = sqlc.arg(status)) AND p.risk = 'high') AS high,
    count(*) FILTER (WHERE (sqlc.arg(status)::text = '' OR a.status = sqlc.arg(status)) AND p.risk = 'medium') AS medium,
    count(*) FILTER (WHERE (sqlc.arg(status)::text = '' OR a.status = sqlc.arg(status)) AND p.risk = 'low') AS low,
    count(*) FILTER (WHERE sqlc.arg(status)::text = '' OR a.status = sqlc.arg(status)) AS any_risk
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id
WHERE a.workspace_id = sqlc.arg(workspace_id)
  AND a.approver_role = ANY (sqlc.arg(roles)::text[])
  AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
  AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class));

-- name: AddApprovalVote :execrows
-- A second vote by the same person changes nothing.
INSERT INTO approval_votes (approval_id, user_id, constraints) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING;

-- name: ListApprovalVotes :many
-- Who approved, with the constraints each attached.
SELECT user_id, constraints FROM approval_votes WHERE approval_id = $1 ORDER BY created_at;

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
SELECT a.*, p.tool, p.action_class, p.risk, p.effect, p.arguments, p.rationale, p.conversation_id, p.notebook_id,
       p.proposed_by_kind, u.email AS proposer_email, p.proposed_by_user_id, p.decision, p.status AS proposal_status,
       p.result, p.error, p.applied_arguments, p.effect_decision, p.owner_id, t.name AS token_name,
       COALESCE(c.title, n.title, '') AS origin_title, r.email AS resolver_email
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id
JOIN users u ON u.id = p.proposed_by_user_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
LEFT JOIN users r ON r.id = a.resolved_by
WHERE a.id = $1 AND a.workspace_id = $2;

-- name: ListApprovalVotesDetail :many
-- The votes so far, for the approver: who and when.
SELECT v.user_id, u.email, v.created_at FROM approval_votes v
JOIN users u ON u.id = v.user_id
WHERE v.approval_id = $1 ORDER BY v.created_at, u.email;

-- name: ListSimilarProposals :many
-- The history of similar calls: the same tool in the workspace, newest first.
SELECT id, status, arguments, created_at, resolved_at, apply_path FROM proposals
WHERE workspace_id = $1 AND tool = $2 AND id <> $3
ORDER BY created_at DESC LIMIT 10;

-- name: Notify :exec
-- Tells every instance's live pages that something changed (delivered at
-- commit).
SELECT pg_notify('gatehouse_events', sqlc.arg(payload)::text);

-- name: ReconcileApprovedButNotRun :many
-- A packet approved whose proposal never left pending_approval (a crash
-- between two steps of an older version): the call did not run, and it is
-- not run now; the proposal fails with the reason.
UPDATE proposals p SET status = 'failed', resolved_at = now(),
       error = 'The approval was recorded but the call never started; nothing ran. Propose it again if it is still needed.'
FROM approvals a
WHERE a.proposal_id = p.id AND a.status = 'approved' AND p.status = 'pending_approval'
RETURNING p.id, p.workspace_id, a.id AS approval_id;

-- name: ReconcileRejectedOrExpired :many
-- A packet rejected or expired whose proposal still waits: it follows the packet.
UPDATE proposals p SET status = CASE a.status WHEN 'rejected' THEN 'rejected' ELSE 'expired' END,
       rejection_reason = CASE a.status WHEN 'rejected' THEN a.rejection_reason END, resolved_at = now()
FROM approvals a
WHERE a.proposal_id = p.id AND a.status IN ('rejected', 'expired') AND p.status = 'pending_approval'
RETURNING p.id, p.workspace_id, a.id AS approval_id, a.status AS approval_status;

-- name: ReconcileOrphanedPackets :many
-- A packet still pending whose proposal was resolved some other way: the
-- packet follows the proposal, so the queue never offers a call that
-- cannot run.
UPDATE approvals a SET status = CASE p.status WHEN 'rejected' THEN 'rejected' WHEN 'expired' THEN 'expired' ELSE 'approved' END,
       resolved_at = now()
FROM proposals p
WHERE a.proposal_id = p.id AND a.status = 'pending' AND p.status IN ('applying', 'applied', 'failed', 'rejected', 'expired')
RETURNING a.id, a.workspace_id, p.id AS proposal_id, p.status AS proposal_status;
