-- name: CreateUser :one
INSERT INTO users (email, password_hash) VALUES ($1, $2) RETURNING *;

-- name: GetUserByEmail :one
SELECT * FROM users WHERE email = $1;

-- name: GetUser :one
SELECT * FROM users WHERE id = $1;

-- name: AddWorkspaceMember :exec
INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, $3);

-- name: GetMembership :one
SELECT u.id AS user_id, u.email, m.workspace_id, m.role
FROM workspace_members m JOIN users u ON u.id = m.user_id
WHERE m.user_id = $1
ORDER BY m.created_at
LIMIT 1;

-- name: CountAdmins :one
SELECT count(*) FROM workspace_members WHERE workspace_id = $1 AND role = 'admin';

-- name: ListMembers :many
SELECT u.id AS user_id, u.email, m.role, m.created_at
FROM workspace_members m JOIN users u ON u.id = m.user_id
WHERE m.workspace_id = $1
ORDER BY u.email;

-- name: LockFirstAdmin :exec
-- Serialises first-start admin creation across instances, for one transaction.
SELECT pg_advisory_xact_lock(4242001);
