-- name: CreateUser :one
INSERT INTO users (email, password_hash) VALUES ($1, $2) RETURNING *;

-- name: GetUserByEmail :one
SELECT * FROM users WHERE email = $1;

-- name: GetUser :one
SELECT * FROM users WHERE id = $1;

-- name: AddWorkspaceMember :exec
INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, $3);

-- name: GetMembership :one
-- The user's first workspace, their role and their named approver roles there.
SELECT u.id AS user_id, u.email, m.workspace_id, m.role, u.password_changed_at,
       ARRAY(SELECT r.role FROM approver_roles r WHERE r.workspace_id = m.workspace_id AND r.user_id = u.id ORDER BY r.role)::text[] AS approver_roles
FROM workspace_members m JOIN users u ON u.id = m.user_id
WHERE m.user_id = $1
ORDER BY m.created_at
LIMIT 1;

-- name: CountAdmins :one
SELECT count(*) FROM workspace_members WHERE workspace_id = $1 AND role = 'admin';

-- name: ListMembers :many
SELECT u.id AS user_id, u.email, m.role, m.created_at,
       ARRAY(SELECT r.role FROM approver_roles r WHERE r.workspace_id = m.workspace_id AND r.user_id = u.id ORDER BY r.role)::text[] AS approver_roles
FROM workspace_members m JOIN users u ON u.id = m.user_id
WHERE m.workspace_id = $1
ORDER BY u.email;

-- name: GetMemberByEmail :one
-- A member of the workspace by email; no row when the email is unknown or
-- its user is not a member there.
SELECT u.id AS user_id, u.email, m.role
FROM workspace_members m JOIN users u ON u.id = m.user_id
WHERE m.workspace_id = $1 AND u.email = $2;

-- name: LockFirstAdmin :exec
-- Serialises first-start admin creation across instances, for one transaction.
SELECT pg_advisory_xact_lock(4242001);

-- name: SetPassword :execrows
-- A new password; sessions that signed in before it end.
UPDATE users SET password_hash = $2, password_changed_at = now() WHERE id = $1;
