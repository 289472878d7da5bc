-- What waits for a user: the home page ("what needs me") and the header's
-- counts.

-- name: CountWaitingCards :one
-- Confirm cards waiting for their owner in the owner's conversations and
-- notebooks.
SELECT count(*) FROM proposals
WHERE workspace_id = sqlc.arg(workspace_id) AND owner_id = sqlc.arg(owner_id) AND status = 'pending';

-- name: ListWaitingCards :many
SELECT p.id, p.tool, p.effect, p.risk, p.created_at, p.conversation_id, p.notebook_id, p.proposed_by_kind,
       coalesce(c.title, n.title, '')::text AS scope_title, coalesce(t.name, '')::text AS token_name
FROM proposals p
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
WHERE p.workspace_id = sqlc.arg(workspace_id) AND p.owner_id = sqlc.arg(owner_id) AND p.status = 'pending'
ORDER BY p.created_at DESC
LIMIT 50;

-- name: CountResolvablePackets :one
-- Pending packets for one of the roles, not proposed by the user (nobody
-- approves their own proposal).
SELECT count(*) FROM approvals a
JOIN proposals p ON p.id = a.proposal_id AND p.workspace_id = a.workspace_id
WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.status = 'pending' AND a.expires_at > now()
  AND a.resolver_roles && sqlc.arg(roles)::text[] AND p.proposed_by_user_id <> sqlc.arg(user_id);

-- name: ListResolvablePackets :many
SELECT a.id, a.summary, a.expires_at, a.approver_role, p.tool, p.risk, p.effect,
       coalesce(c.title, n.title, '')::text AS scope_title
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id AND p.workspace_id = a.workspace_id
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.status = 'pending' AND a.expires_at > now()
  AND a.resolver_roles && sqlc.arg(roles)::text[] AND p.proposed_by_user_id <> sqlc.arg(user_id)
ORDER BY a.expires_at
LIMIT 20;

-- name: ListAgentOutcomes :many
-- The latest calls proposed with the user's agent tokens (in the user's own
-- scopes: the proposer is the owner; by proposals_owner_time_idx).
SELECT p.id, p.tool, p.status, p.created_at, p.resolved_at, p.conversation_id, p.notebook_id,
       t.name AS token_name, coalesce(c.title, n.title, '')::text AS scope_title
FROM proposals p
JOIN api_tokens t ON t.id = p.proposed_by_token_id
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
WHERE p.workspace_id = sqlc.arg(workspace_id) AND p.owner_id = sqlc.arg(user_id) AND p.proposed_by_user_id = sqlc.arg(user_id)
  AND p.proposed_by_kind = 'agent'
ORDER BY p.created_at DESC
LIMIT 20;
