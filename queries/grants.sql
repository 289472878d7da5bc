-- name: InsertGrant :one
-- A grant lasts its minutes from the transaction's time, as created_at.
INSERT INTO grants (workspace_id, owner_id, granted_by, conversation_id, notebook_id, token_id, tool, action_class,
                    ceiling, approver_role, bounds, max_calls, remaining, expires_at, proposal_id, approval_id)
VALUES (sqlc.arg(workspace_id), sqlc.arg(owner_id), sqlc.arg(granted_by), sqlc.narg(conversation_id), sqlc.narg(notebook_id),
        sqlc.narg(token_id), sqlc.narg(tool), sqlc.narg(action_class), sqlc.arg(ceiling), sqlc.narg(approver_role),
        sqlc.arg(bounds), sqlc.arg(max_calls), sqlc.arg(max_calls), now() + make_interval(mins => sqlc.arg(minutes)::int),
        sqlc.narg(proposal_id), sqlc.narg(approval_id))
RETURNING *;

-- name: UseGrant :one
-- One call of a grant, in the call's transaction: of concurrent callers
-- on any instance, at most remaining of them get a row (the row's lock
-- makes each wait for the one before, then read its remaining again). A
-- grant revoked or expired meanwhile gives none, and so does an
-- approver's grant whose grantor no longer holds its role. Its audit row
-- is written by the same statement, which also names the grantor for the
-- decision's reason.
WITH used AS (
    UPDATE grants g SET remaining = g.remaining - 1, last_used_at = now()
    WHERE g.workspace_id = sqlc.arg(workspace_id) AND g.id = sqlc.arg(id)
      AND g.remaining > 0 AND g.revoked_at IS NULL AND g.expires_at > now()
      AND (g.ceiling = 'review_required'
           OR EXISTS (SELECT 1 FROM workspace_members m WHERE m.workspace_id = g.workspace_id AND m.user_id = g.granted_by
                      AND ((m.role = 'admin' AND g.approver_role IN ('approver', 'admin')) OR (m.role = 'approver' AND g.approver_role = 'approver')))
           OR EXISTS (SELECT 1 FROM approver_roles r WHERE r.workspace_id = g.workspace_id AND r.user_id = g.granted_by AND r.role = g.approver_role))
    RETURNING g.workspace_id, g.id, g.remaining, g.max_calls, g.granted_by
), audit AS (
    INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id, data, retention_until)
    SELECT used.workspace_id, sqlc.arg(actor_kind), sqlc.narg(actor_user_id), sqlc.narg(actor_token_id), 'grant.used', 'grant', used.id::text,
           sqlc.arg(data)::jsonb || jsonb_build_object('remaining', used.remaining), sqlc.arg(retention_until)
    FROM used
)
SELECT used.remaining, u.email AS granted_by_email FROM used JOIN users u ON u.id = used.granted_by;

-- name: GetGrantForUpdate :one
SELECT * FROM grants WHERE workspace_id = $1 AND id = $2 FOR UPDATE;

-- name: RevokeGrant :one
UPDATE grants SET revoked_at = now(), revoked_by = sqlc.arg(revoked_by)
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id) AND revoked_at IS NULL
RETURNING *;

-- name: ListGrants :many
-- A page of the grants a person sees, newest first (keyset: before the
-- position (before_at, before_id) of the previous page's last, max_rows at
-- most): those they gave and those over
-- their calls (every one of the workspace for an admin, when all is set),
-- optionally those that apply in one conversation or notebook (its own,
-- and its owner's token grants).
SELECT g.*, gu.email AS granted_by_email, ou.email AS owner_email, t.name AS token_name,
       coalesce(c.title, n.title, '')::text AS scope_title
FROM grants g
JOIN users gu ON gu.id = g.granted_by
JOIN users ou ON ou.id = g.owner_id
LEFT JOIN api_tokens t ON t.id = g.token_id
LEFT JOIN conversations c ON c.id = g.conversation_id
LEFT JOIN notebooks n ON n.id = g.notebook_id
WHERE g.workspace_id = sqlc.arg(workspace_id)
  AND (sqlc.arg(all_grants)::boolean OR g.granted_by = sqlc.arg(user_id) OR g.owner_id = sqlc.arg(user_id))
  AND (sqlc.narg(conversation_id)::uuid IS NULL OR g.conversation_id = sqlc.narg(conversation_id) OR (g.token_id IS NOT NULL AND g.owner_id = sqlc.arg(user_id)))
  AND (sqlc.narg(notebook_id)::uuid IS NULL OR g.notebook_id = sqlc.narg(notebook_id) OR (g.token_id IS NOT NULL AND g.owner_id = sqlc.arg(user_id)))
  AND (NOT sqlc.arg(live_only)::boolean OR (g.revoked_at IS NULL AND g.remaining > 0 AND g.expires_at > now()))
  AND (sqlc.narg(before_at)::timestamptz IS NULL OR (g.created_at, g.id) < (sqlc.narg(before_at)::timestamptz, sqlc.narg(before_id)::uuid))
ORDER BY g.created_at DESC, g.id DESC
LIMIT sqlc.arg(max_rows);

-- name: CountLiveGrants :one
-- The scope header's count: the live grants that can apply in one
-- conversation or notebook of its owner (its own and the owner's token
-- grants).
SELECT count(*) FROM grants g
WHERE g.workspace_id = sqlc.arg(workspace_id) AND g.owner_id = sqlc.arg(owner_id)
  AND (g.conversation_id = sqlc.narg(conversation_id) OR g.notebook_id = sqlc.narg(notebook_id) OR g.token_id IS NOT NULL)
  AND g.revoked_at IS NULL AND g.remaining > 0 AND g.expires_at > now();
