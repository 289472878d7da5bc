-- name: CreateNotebook :one
INSERT INTO notebooks (workspace_id, owner_id, title) VALUES ($1, $2, $3) RETURNING *;

-- name: GetNotebook :one
-- Owner-scoped: another user's notebook is not found.
SELECT * FROM notebooks WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: GetNotebookForUpdate :one
SELECT * FROM notebooks WHERE id = $1 AND workspace_id = $2 AND owner_id = $3 FOR UPDATE;

-- name: ListNotebooks :many
-- Most recently active first: a notebook's activity is its last cell,
-- derived here so no call has to update the notebook's row.
SELECT sqlc.embed(n), greatest(n.updated_at, coalesce(c.created_at, n.updated_at))::timestamptz AS active_at
FROM notebooks n
LEFT JOIN LATERAL (SELECT created_at FROM proposals WHERE workspace_id = n.workspace_id AND notebook_id = n.id ORDER BY created_at DESC LIMIT 1) c ON true
WHERE n.workspace_id = $1 AND n.owner_id = $2
ORDER BY active_at DESC LIMIT 200;

-- name: UpdateNotebook :one
UPDATE notebooks SET title = $2, trust_level = $3, environment = sqlc.narg(environment), updated_at = now() WHERE id = $1 RETURNING *;

