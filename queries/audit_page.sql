-- The audit log page: newest first, keyset-paginated by id, filtered by
-- actor, action, object (a subject id, or the proposal, packet or scope a
-- row is about) and time range. Members see only rows about their own
-- conversations, notebooks and calls, and their own actions. Subject ids
-- are text (a tool's name for a refused call); they are compared as uuids
-- only when they are one, so the owners' rows are found by primary key.
--
-- Each filter reads an index (migration 37; the plan test in
-- internal/audit): an object that names a few rows (a call, a packet) is
-- a bitmap OR of audit_events_object_idx and the partial indexes of the
-- rows whose data names a proposal_id, approval_id or scope_id, one that
-- names many (a conversation) is met walking the log newest first; actor
-- and action walk their indexes newest first (an action every call writes
-- walks the log); a time range comes with the range of ids its rows have
-- (AuditIDRange), which bounds whichever index is walked. A filter that
-- is not set folds away when PostgreSQL plans the statement for its
-- values (custom plans: this statement's generic plan would be a scan).

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
  AND (sqlc.narg(min_id)::bigint IS NULL OR e.id >= sqlc.narg(min_id))
  AND (sqlc.narg(max_id)::bigint IS NULL OR e.id <= sqlc.narg(max_id))
  AND (sqlc.arg(all_rows)::bool
       OR e.actor_user_id = sqlc.arg(viewer_id)
       OR EXISTS (SELECT 1 FROM conversations c WHERE c.owner_id = sqlc.arg(viewer_id) AND c.id IN (
              CASE WHEN e.subject_type = 'conversation' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END,
              CASE WHEN e.data->>'scope' = 'conversation' AND e.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (e.data->>'scope_id')::uuid END))
       OR EXISTS (SELECT 1 FROM notebooks n WHERE n.owner_id = sqlc.arg(viewer_id) AND n.id IN (
              CASE WHEN e.subject_type = 'notebook' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END,
              CASE WHEN e.data->>'scope' = 'notebook' AND e.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (e.data->>'scope_id')::uuid END))
       OR EXISTS (SELECT 1 FROM proposals p WHERE p.workspace_id = e.workspace_id AND p.owner_id = sqlc.arg(viewer_id) AND p.id IN (
              CASE WHEN e.subject_type = 'proposal' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END,
              CASE WHEN e.data->>'proposal_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (e.data->>'proposal_id')::uuid END))
       OR EXISTS (SELECT 1 FROM approvals a JOIN proposals p ON p.id = a.proposal_id AND p.workspace_id = a.workspace_id
                  WHERE a.workspace_id = e.workspace_id AND p.owner_id = sqlc.arg(viewer_id) AND a.id =
              CASE WHEN e.subject_type = 'approval' AND e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END))
ORDER BY e.id DESC
LIMIT 51;

-- name: AuditIDRange :one
-- The ids of a workspace's audit rows created in [since, until) (a null
-- end is open) are in [min_id, max_id] (both 0, which no row has, when
-- there are none): the hours' ranges (audit_hours) of the rows up to its
-- watermark, and the rows after it, read themselves. (No "IS NULL OR":
-- the statement's generic plan is its plan, made once per connection
-- instead of for each page over every partition.)
SELECT coalesce(min(x.lo), 0)::bigint AS min_id, coalesce(max(x.hi), 0)::bigint AS max_id
FROM (
    SELECT min(h.min_id) AS lo, max(h.max_id) AS hi
    FROM audit_hours h
    WHERE h.workspace_id = sqlc.arg(workspace_id)
      AND h.hour >= date_trunc('hour', coalesce(sqlc.narg(since)::timestamptz, '-infinity') AT TIME ZONE 'UTC')
      AND h.hour < coalesce(sqlc.narg(until)::timestamptz, 'infinity') AT TIME ZONE 'UTC'
    UNION ALL
    SELECT min(a.id), max(a.id)
    FROM audit_events a
    WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.id > (SELECT f.folded_to FROM audit_hours_folded f)
      AND a.created_at >= coalesce(sqlc.narg(since)::timestamptz, '-infinity')
      AND a.created_at < coalesce(sqlc.narg(until)::timestamptz, 'infinity')
) x;

-- name: GetMemberIDByEmail :one
-- The member of the workspace with this email (the audit page's actor
-- filter).
SELECT u.id FROM users u
JOIN workspace_members m ON m.user_id = u.id AND m.workspace_id = sqlc.arg(workspace_id)
WHERE u.email = lower(sqlc.arg(email)::text);
