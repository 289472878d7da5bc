-- name: GrantApproverRole :execrows
-- No row: the user held the role already.
INSERT INTO approver_roles (workspace_id, user_id, role, granted_by)
VALUES ($1, $2, $3, sqlc.narg(granted_by))
ON CONFLICT DO NOTHING;

-- name: RevokeApproverRole :execrows
DELETE FROM approver_roles WHERE workspace_id = $1 AND user_id = $2 AND role = $3;

-- name: ListApproverRolesOfUser :many
SELECT role FROM approver_roles WHERE workspace_id = $1 AND user_id = $2 ORDER BY role;

-- name: ListApproverRoles :many
-- Every named approver role in the workspace, with who holds it.
SELECT r.role, r.user_id, u.email, r.created_at
FROM approver_roles r JOIN users u ON u.id = r.user_id
WHERE r.workspace_id = $1
ORDER BY r.role, u.email;

-- name: HoldsApproverRole :one
-- Read in the resolving transaction, so a role revoked a moment ago no
-- longer resolves a packet.
SELECT EXISTS (SELECT 1 FROM approver_roles WHERE workspace_id = $1 AND user_id = $2 AND role = $3);
