-- name: CreateConversation :one
INSERT INTO conversations (workspace_id, owner_id, title) VALUES ($1, $2, $3) RETURNING *;

-- name: GetConversation :one
-- Owner-scoped: another user's conversation is not found.
SELECT * FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: GetConversationForUpdate :one
SELECT * FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3 FOR UPDATE;

-- name: ListConversations :many
-- Most recently active first: a conversation's activity is its last
-- line (a message or a call), derived here so no call has to update the conversation's row
-- (a row every call in the conversation would queue on).
SELECT sqlc.embed(c), greatest(c.updated_at, coalesce(m.created_at, c.updated_at))::timestamptz AS active_at
FROM conversations c
LEFT JOIN LATERAL (SELECT created_at FROM transcript_lines WHERE workspace_id = c.workspace_id AND conversation_id = c.id ORDER BY id DESC LIMIT 1) m ON true
WHERE c.workspace_id = $1 AND c.owner_id = $2
ORDER BY active_at DESC LIMIT 200;

-- name: UpdateConversation :one
UPDATE conversations SET title = $2, permission_mode = $3, updated_at = now() WHERE id = $1 RETURNING *;

