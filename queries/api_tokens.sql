-- name: CreateAPIToken :one
INSERT INTO api_tokens (workspace_id, user_id, kind, name, token_hash, connector)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id, workspace_id, user_id, kind, name, created_at;

-- name: LookupAPIToken :one
-- Resolves a live token to its owner, the owner's role in the token's
-- workspace and the named approver roles they hold there.
SELECT t.id, t.workspace_id, t.user_id, t.kind, t.name, t.connector, u.email, m.role,
       ARRAY(SELECT r.role FROM approver_roles r WHERE r.workspace_id = m.workspace_id AND r.user_id = u.id ORDER BY r.role)::text[] AS approver_roles
FROM api_tokens t
JOIN users u ON u.id = t.user_id
JOIN workspace_members m ON m.workspace_id = t.workspace_id AND m.user_id = t.user_id
WHERE t.token_hash = $1 AND t.revoked_at IS NULL;

-- name: TouchAPIToken :exec
UPDATE api_tokens SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: RevokeAPIToken :execrows
UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL;
