-- name: CreateConversation :one
INSERT INTO conversations (workspace_id, owner_id, title) VALUES ($1, $2, $3) RETURNING *;

-- name: GetConversation :one
-- Owner-scoped: another user's conversation is not found.
SELECT * FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: GetConversationForUpdate :one
SELECT * FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3 FOR UPDATE;

-- name: ListConversations :many
SELECT * FROM conversations WHERE workspace_id = $1 AND owner_id = $2 ORDER BY updated_at DESC LIMIT 200;

-- name: UpdateConversation :one
UPDATE conversations SET title = $2, permission_mode = $3, updated_at = now() WHERE id = $1 RETURNING *;

-- name: TouchConversation :exec
UPDATE conversations SET updated_at = now() WHERE id = $1;
