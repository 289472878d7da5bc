-- name: CreateAPIToken :one
INSERT INTO api_tokens (workspace_id, user_id, kind, name, token_hash, connector, expires_at, scope_tools, scope_read_only)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING id, workspace_id, user_id, kind, name, created_at;

-- name: LookupAPIToken :one
-- Resolves a live bearer token to its owner, the owner's role in the
-- token's workspace, the named approver roles they hold there, the
-- token's scope and, for an OAuth grant, its audience and binding. Live:
-- not revoked, not expired, and its current secret not expired (an OAuth
-- access token lives an hour; a refresh gives the row a new secret).
SELECT t.id, t.workspace_id, t.user_id, t.kind, t.name, t.connector, t.scope_tools, t.scope_read_only,
       t.audience, t.secret_expires_at, t.conversation_id, t.notebook_id, u.email, m.role,
       ARRAY(SELECT r.role FROM approver_roles r WHERE r.workspace_id = m.workspace_id AND r.user_id = u.id ORDER BY r.role)::text[] AS approver_roles
FROM api_tokens t
JOIN users u ON u.id = t.user_id
JOIN workspace_members m ON m.workspace_id = t.workspace_id AND m.user_id = t.user_id
WHERE t.token_hash = $1 AND t.revoked_at IS NULL
  AND (t.expires_at IS NULL OR t.expires_at > now())
  AND (t.secret_expires_at IS NULL OR t.secret_expires_at > now());

-- name: TouchAPIToken :exec
UPDATE api_tokens SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: RevokeAPIToken :execrows
UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL;

-- name: ListAPITokens :many
-- The workspace's tokens, newest first; only those of one user when
-- user_id is set.
SELECT t.id, t.user_id, u.email, t.kind, t.name, t.connector, t.created_at, t.last_used_at, t.expires_at, t.revoked_at,
       t.scope_tools, t.scope_read_only
FROM api_tokens t JOIN users u ON u.id = t.user_id
WHERE t.workspace_id = sqlc.arg(workspace_id)
  AND (sqlc.narg(user_id)::uuid IS NULL OR t.user_id = sqlc.narg(user_id))
ORDER BY t.created_at DESC, t.id;

-- name: GetAPIToken :one
SELECT t.id, t.workspace_id, t.user_id, t.kind, t.name, t.revoked_at
FROM api_tokens t WHERE t.id = $1;
