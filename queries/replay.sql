-- name: ReplayCallsPage :many
-- A page of every workspace's recorded calls of a period, for the policy
-- replay (gatehouse policy replay without --workspace): keyset on the
-- primary key. Ids are time-ordered (UUIDv7, migration 17), so the
-- caller bounds the scan with ids made from the period's ends (with a
-- margin for clocks), a window of a few hours at a time, and created_at
-- says exactly which calls are in it.
SELECT id, workspace_id, tool, status, (applied_arguments IS NOT NULL)::boolean AS edited, decision_input, created_at
FROM proposals
WHERE id > sqlc.arg(after) AND id < sqlc.arg(before)
  AND created_at >= sqlc.arg(since) AND created_at < sqlc.arg(until)
ORDER BY id
LIMIT sqlc.arg(page_size);

-- name: ReplayWorkspaceCallsPage :many
-- The same page, of one workspace's calls. The caller bounds each page's
-- ids to a window of a few hours: a small workspace's page is then a
-- bitmap of its calls in that window (proposals_owner_time_idx and the
-- primary key), not of every call left in the period, sorted again for
-- every page.
SELECT id, workspace_id, tool, status, (applied_arguments IS NOT NULL)::boolean AS edited, decision_input, created_at
FROM proposals
WHERE workspace_id = sqlc.arg(workspace_id) AND id > sqlc.arg(after) AND id < sqlc.arg(before)
  AND created_at >= sqlc.arg(since) AND created_at < sqlc.arg(until)
ORDER BY id
LIMIT sqlc.arg(page_size);

-- name: FindWorkspacesByName :many
-- The workspaces a command-line --workspace names by slug or name (two
-- rows: the name is ambiguous).
SELECT id, slug, name FROM workspaces
WHERE slug = sqlc.arg(name) OR name = sqlc.arg(name)
ORDER BY slug
LIMIT 2;
