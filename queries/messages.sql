-- name: InsertMessage :one
INSERT INTO messages (conversation_id, role, content, proposal_id, author_user_id)
VALUES ($1, $2, $3, $4, $5) RETURNING *;

-- name: ListMessages :many
SELECT * FROM messages WHERE conversation_id = $1 ORDER BY id;
