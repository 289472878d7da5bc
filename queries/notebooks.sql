-- name: CreateNotebook :one
INSERT INTO notebooks (workspace_id, owner_id, title) VALUES ($1, $2, $3) RETURNING *;

-- name: GetNotebook :one
-- Owner-scoped: another user's notebook is not found.
SELECT * FROM notebooks WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: GetNotebookForUpdate :one
SELECT * FROM notebooks WHERE id = $1 AND workspace_id = $2 AND owner_id = $3 FOR UPDATE;

-- name: ListNotebooks :many
SELECT * FROM notebooks WHERE workspace_id = $1 AND owner_id = $2 ORDER BY updated_at DESC LIMIT 200;

-- name: UpdateNotebook :one
UPDATE notebooks SET title = $2, trust_level = $3, updated_at = now() WHERE id = $1 RETURNING *;

-- name: TouchNotebook :exec
UPDATE notebooks SET updated_at = now() WHERE id = $1;
