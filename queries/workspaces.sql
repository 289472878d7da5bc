-- name: GetWorkspaceBySlug :one
SELECT * FROM workspaces WHERE slug = $1;

-- name: GetWorkspace :one
SELECT * FROM workspaces WHERE id = $1;

-- name: EnsureWorkspace :one
-- Creates the workspace if it is missing; safe to race from several instances.
INSERT INTO workspaces (slug, name) VALUES ($1, $2)
ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug
RETURNING *;

-- name: GetWorkspaceForUpdate :one
SELECT * FROM workspaces WHERE id = $1 FOR UPDATE;

-- name: UpdateWorkspaceSettings :one
UPDATE workspaces SET auto_approve_high_risk = $2, internal_domains = $3, webhook_allowlist = $4, rationale_min_length = $5,
    rationale_mode = $6, rationale_warn_until = $7, escalate_after_minutes = $8, escalate_to_role = $9, approval_quorums = $10, confirm_runs_high_risk = $11
WHERE id = $1
RETURNING *;

-- name: ListWorkspaceIDsForUpdate :many
-- Every workspace, locked in id order: the policy file's settings are
-- written to each in one transaction.
SELECT id FROM workspaces ORDER BY id FOR UPDATE;
