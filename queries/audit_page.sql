-- The audit log page: newest first, keyset-paginated by id, filtered by
-- actor, action, object (a subject id, or the proposal, packet or scope a
-- row is about) and time range. Members see only rows about their own
-- conversations, notebooks and calls, and their own actions. Subject ids
-- are text (a tool's name for a refused call); they are compared as uuids
-- only when they are one, so the owners' rows are found by primary key.

-- name: ListAuditPage :many
SELECT e.id, e.actor_kind, e.action, e.subject_type, e.subject_id, e.data, e.created_at,
       coalesce(u.email, '')::text AS actor_email, coalesce(t.name, '')::text AS token_name
FROM audit_events e
LEFT JOIN users u ON u.id = e.actor_user_id
LEFT JOIN api_tokens t ON t.id = e.actor_token_id
WHERE e.workspace_id = sqlc.arg(workspace_id)
  AND (sqlc.narg(before)::bigint IS NULL OR e.id < sqlc.narg(before))
  AND (sqlc.narg(actor_user_id)::uuid IS NULL OR e.actor_user_id = sqlc.narg(actor_user_id))
  AND (sqlc.arg(action)::text = '' OR e.action = sqlc.arg(action))
  AND (sqlc.arg(object)::text = '' OR e.subject_id = sqlc.arg(object)
       OR e.data->>'proposal_id' = sqlc.arg(object) OR e.data->>'approval_id' = sqlc.arg(object)
       OR e.data->>'scope_id' = sqlc.arg(object))
  AND (sqlc.narg(since)::timestamptz IS NULL OR e.created_at >= sqlc.narg(since))
  AND (sqlc.narg(until)::timestamptz IS NULL OR e.created_at < sqlc.narg(until))
  AND (sqlc.arg(all_rows)::bool
       OR e.actor_user_id = sqlc.arg(viewer_id)
       OR EXISTS (SELECT 1 FROM conversations c WHERE c.owner_id = sqlc.arg(viewer_id) AND c.id IN (
              CASE WHEN e.subject_type = 'conversation' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END,
              CASE WHEN e.data->>'scope' = 'conversation' AND e.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (e.data->>'scope_id')::uuid END))
       OR EXISTS (SELECT 1 FROM notebooks n WHERE n.owner_id = sqlc.arg(viewer_id) AND n.id IN (
              CASE WHEN e.subject_type = 'notebook' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END,
              CASE WHEN e.data->>'scope' = 'notebook' AND e.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (e.data->>'scope_id')::uuid END))
       OR EXISTS (SELECT 1 FROM proposals p WHERE p.owner_id = sqlc.arg(viewer_id) AND p.id IN (
              CASE WHEN e.subject_type = 'proposal' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END,
              CASE WHEN e.data->>'proposal_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (e.data->>'proposal_id')::uuid END))
       OR EXISTS (SELECT 1 FROM approvals a JOIN proposals p ON p.id = a.proposal_id WHERE p.owner_id = sqlc.arg(viewer_id) AND a.id =
              CASE WHEN e.subject_type = 'approval' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END))
ORDER BY e.id DESC
LIMIT 51;

-- name: GetMemberIDByEmail :one
-- The member of the workspace with this email (the audit page's actor
-- filter).
SELECT u.id FROM users u
JOIN workspace_members m ON m.user_id = u.id AND m.workspace_id = sqlc.arg(workspace_id)
WHERE u.email = lower(sqlc.arg(email)::text);
