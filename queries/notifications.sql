-- Approvals that reach people (migration 44, internal/notify).

-- name: FoldNotifications :one
-- The calls that started waiting for a person among the audit rows with
-- ids in (after, upto] (every workspace's: the audit log's global feed),
-- as notifications: a confirm card to its owner (when an agent proposed
-- it), an approval packet to everyone who may resolve it (its named
-- role's holders, or approvers and admins), never its proposer or owner;
-- by email unless they turned it off, and to their webhook when they have
-- one. A call already decided by now is skipped. Digest readers' are due
-- at the end of their current window.
--
-- And the alerts (migration 50), to the workspace's admins, due at once
-- (a page ignores digests): every irreversible call executed or failed
-- (its audit row says authority irreversible), and, in rationale warn
-- mode, a caller's first call of the UTC day accepted without the
-- rationale strict mode requires (rationale_alerts keeps one per caller
-- and day).
WITH calls AS (
    SELECT DISTINCT p.workspace_id, p.id AS proposal_id, p.owner_id, p.proposed_by_user_id, p.proposed_by_kind, p.status,
                    a.id AS approval_id,
                    -- A packet escalated by the sweeper (approval.escalated,
                    -- migration 47) goes to the role it was escalated to.
                    CASE WHEN e.action = 'approval.escalated' THEN a.escalate_to ELSE a.approver_role END AS approver_role
    FROM audit_events e
    JOIN proposals p ON p.workspace_id = e.workspace_id
        AND p.id = CASE WHEN e.subject_type = 'approval' THEN (e.data->>'proposal_id')::uuid
                        WHEN e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END
    LEFT JOIN approvals a ON a.workspace_id = p.workspace_id AND a.proposal_id = p.id AND a.status = 'pending'
    WHERE e.id > sqlc.arg(after)::bigint AND e.id <= sqlc.arg(upto)::bigint
      -- Only a call that was decided to wait (the audit row's own state:
      -- read without touching proposals, so a fold over the calls that
      -- ran at once, nearly all of them, costs next to nothing), one
      -- sent on to an approver at the moment of effect, or a packet
      -- escalated while it waits.
      AND ((e.subject_type = 'proposal'
            AND (e.action = 'proposal.escalated' OR (e.action = 'proposal.created' AND e.data->>'state' IN ('review_required', 'deferred'))))
           OR (e.subject_type = 'approval' AND e.action = 'approval.escalated'))
      AND p.status IN ('pending', 'pending_approval')
), alerted AS (
    -- A rationale warning is in a call's created row (or the one row of a
    -- call that ran at once, which may also say it was irreversible: then
    -- it is both).
    SELECT e.workspace_id, p.id AS proposal_id, 'alert' AS kind,
           coalesce(p.proposed_by_token_id, p.proposed_by_user_id) AS caller, (e.created_at AT TIME ZONE 'UTC')::date AS day
    FROM audit_events e
    JOIN proposals p ON p.workspace_id = e.workspace_id
        AND p.id = CASE WHEN e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END
    WHERE e.id > sqlc.arg(after)::bigint AND e.id <= sqlc.arg(upto)::bigint
      AND e.subject_type = 'proposal'
      AND e.action IN ('proposal.applied', 'proposal.failed') AND e.data->>'authority' = 'irreversible'
    UNION ALL
    SELECT e.workspace_id, p.id AS proposal_id, 'rationale' AS kind,
           coalesce(p.proposed_by_token_id, p.proposed_by_user_id) AS caller, (e.created_at AT TIME ZONE 'UTC')::date AS day
    FROM audit_events e
    JOIN proposals p ON p.workspace_id = e.workspace_id
        AND p.id = CASE WHEN e.subject_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.subject_id::uuid END
    WHERE e.id > sqlc.arg(after)::bigint AND e.id <= sqlc.arg(upto)::bigint
      AND e.subject_type = 'proposal'
      AND e.action IN ('proposal.created', 'proposal.applied', 'proposal.failed') AND e.data->'rationale_warning' = 'true'::jsonb
), first_offences AS (
    INSERT INTO rationale_alerts (workspace_id, caller, day, proposal_id)
    SELECT DISTINCT ON (a.workspace_id, a.caller, a.day) a.workspace_id, a.caller, a.day, a.proposal_id
    FROM alerted a WHERE a.kind = 'rationale'
    ORDER BY a.workspace_id, a.caller, a.day, a.proposal_id
    ON CONFLICT (workspace_id, caller, day) DO NOTHING
    RETURNING workspace_id, proposal_id
), recipients AS (
    SELECT c.workspace_id, c.proposal_id, NULL::uuid AS approval_id, c.owner_id AS user_id, 'card' AS kind
    FROM calls c
    WHERE c.status = 'pending' AND c.proposed_by_kind = 'agent'
    UNION
    SELECT a.workspace_id, a.proposal_id, NULL::uuid, m.user_id, 'alert'
    FROM alerted a
    JOIN workspace_members m ON m.workspace_id = a.workspace_id AND m.role = 'admin'
    WHERE a.kind = 'alert'
    UNION
    SELECT f.workspace_id, f.proposal_id, NULL::uuid, m.user_id, 'rationale'
    FROM first_offences f
    JOIN workspace_members m ON m.workspace_id = f.workspace_id AND m.role = 'admin'
    UNION
    SELECT c.workspace_id, c.proposal_id, c.approval_id, m.user_id, 'packet'
    FROM calls c
    JOIN workspace_members m ON m.workspace_id = c.workspace_id
    WHERE c.status = 'pending_approval' AND c.approval_id IS NOT NULL
      AND m.user_id <> c.owner_id AND m.user_id <> c.proposed_by_user_id
      AND CASE c.approver_role
              WHEN 'approver' THEN m.role IN ('approver', 'admin')
              WHEN 'admin' THEN m.role = 'admin'
              ELSE EXISTS (SELECT 1 FROM approver_roles r
                           WHERE r.workspace_id = c.workspace_id AND r.user_id = m.user_id AND r.role = c.approver_role)
          END
), ins AS (
    INSERT INTO notifications (workspace_id, user_id, channel, kind, proposal_id, approval_id, next_attempt_at)
    SELECT r.workspace_id, r.user_id, ch.channel, r.kind, r.proposal_id, r.approval_id,
           CASE WHEN coalesce(np.digest_minutes, 0) > 0 AND r.kind IN ('card', 'packet')
                THEN date_bin(make_interval(mins => np.digest_minutes), now(), 'epoch') + make_interval(mins => np.digest_minutes)
                ELSE now() END
    FROM recipients r
    LEFT JOIN notification_preferences np ON np.workspace_id = r.workspace_id AND np.user_id = r.user_id
    CROSS JOIN LATERAL (VALUES ('email', coalesce(np.email, true)), ('webhook', np.webhook_url IS NOT NULL)) AS ch (channel, wanted)
    WHERE ch.wanted
    ON CONFLICT (workspace_id, proposal_id, user_id, channel, kind) DO NOTHING
    RETURNING 1
)
SELECT count(*)::int AS queued FROM ins;

-- name: ClaimNotifications :many
-- The sender takes up to max_rows notifications that are due (or whose
-- sender's lease ran out), a person's and channel's together, for lease
-- seconds; other instances skip them. Each comes with what its message
-- says and where it goes.
WITH due AS (
    SELECT n.workspace_id, n.id FROM notifications n
    WHERE n.status IN ('queued', 'sending') AND n.next_attempt_at <= now() AND (n.lease_until IS NULL OR n.lease_until < now())
    ORDER BY n.next_attempt_at, n.workspace_id, n.user_id, n.channel
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE notifications n SET status = 'sending', attempts = n.attempts + 1,
        lease_until = now() + make_interval(secs => sqlc.arg(lease_seconds)::int)
    FROM due WHERE n.workspace_id = due.workspace_id AND n.id = due.id
    RETURNING n.*
)
SELECT c.workspace_id, c.id, c.user_id, c.channel, c.kind, c.proposal_id, c.approval_id, c.attempts, c.created_at,
       u.email AS user_email,
       coalesce(np.webhook_url, '')::text AS webhook_url, coalesce(np.webhook_secret, '')::text AS webhook_secret,
       np.quiet_start, np.quiet_end, coalesce(np.time_zone, 'UTC')::text AS time_zone,
       w.webhook_allowlist,
       p.tool, p.status AS proposal_status, p.rationale, p.risk, p.action_class, p.decision, p.arguments, p.conversation_id, p.notebook_id,
       coalesce(a.summary, '')::text AS summary, a.expires_at AS packet_expires_at, coalesce(a.status, '')::text AS packet_status,
       p.error, coalesce(t.name, '')::text AS token_name,
       coalesce(a.approver_role, '')::text AS approver_role,
       coalesce(CASE WHEN a.escalated_at IS NOT NULL THEN a.escalate_to END, '')::text AS escalated_to
FROM claimed c
JOIN users u ON u.id = c.user_id
JOIN workspaces w ON w.id = c.workspace_id
JOIN proposals p ON p.workspace_id = c.workspace_id AND p.id = c.proposal_id
-- The call's packet (an alert's too: its summary).
LEFT JOIN approvals a ON a.workspace_id = c.workspace_id AND a.proposal_id = c.proposal_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
LEFT JOIN notification_preferences np ON np.workspace_id = c.workspace_id AND np.user_id = c.user_id
ORDER BY c.workspace_id, c.user_id, c.channel, c.id;

-- name: FinishNotification :exec
-- A notification's delivery: sent, failed for good, dropped (nothing left
-- to decide), or to be tried again at next_attempt_at.
UPDATE notifications SET status = sqlc.arg(status), lease_until = NULL, last_error = sqlc.narg(last_error),
    next_attempt_at = coalesce(sqlc.narg(next_attempt_at), next_attempt_at),
    sent_at = CASE WHEN sqlc.arg(status) = 'sent' THEN now() END
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id);

-- name: DeferNotification :exec
-- Not now (quiet hours): back in the queue until at, the attempt not
-- counted.
UPDATE notifications SET status = 'queued', lease_until = NULL, attempts = attempts - 1, next_attempt_at = sqlc.arg(at)
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id);

-- name: ListMyNotifications :many
-- A person's latest notifications, for their settings page.
SELECT n.id, n.channel, n.kind, n.proposal_id, n.status, n.attempts, n.last_error, n.created_at, n.sent_at, p.tool
FROM notifications n
JOIN proposals p ON p.workspace_id = n.workspace_id AND p.id = n.proposal_id
WHERE n.workspace_id = sqlc.arg(workspace_id) AND n.user_id = sqlc.arg(user_id)
ORDER BY n.id DESC LIMIT 20;

-- name: GetNotificationPreferences :one
SELECT * FROM notification_preferences WHERE workspace_id = sqlc.arg(workspace_id) AND user_id = sqlc.arg(user_id);

-- name: UpsertNotificationPreferences :one
INSERT INTO notification_preferences AS np (workspace_id, user_id, email, webhook_url, webhook_secret, quiet_start, quiet_end, time_zone, digest_minutes)
VALUES (sqlc.arg(workspace_id), sqlc.arg(user_id), sqlc.arg(email), sqlc.narg(webhook_url), sqlc.narg(webhook_secret),
        sqlc.narg(quiet_start), sqlc.narg(quiet_end), sqlc.arg(time_zone), sqlc.arg(digest_minutes))
ON CONFLICT (workspace_id, user_id) DO UPDATE SET email = excluded.email, webhook_url = excluded.webhook_url,
    webhook_secret = excluded.webhook_secret, quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end,
    time_zone = excluded.time_zone, digest_minutes = excluded.digest_minutes, updated_at = now()
RETURNING *;

-- name: InsertActionLink :exec
INSERT INTO action_links (workspace_id, token_hash, user_id, proposal_id, approval_id, arguments_hash, expires_at)
VALUES (sqlc.arg(workspace_id), sqlc.arg(token_hash), sqlc.arg(user_id), sqlc.arg(proposal_id), sqlc.narg(approval_id),
        sqlc.arg(arguments_hash), sqlc.arg(expires_at));

-- name: GetActionLink :one
-- A link, with the call it decides as it is now.
SELECT l.*, p.tool, p.arguments, p.rationale, p.risk, p.effect, p.action_class, p.decision, p.status AS proposal_status,
       p.owner_id, p.conversation_id, p.notebook_id,
       coalesce(a.summary, '')::text AS summary, coalesce(a.status, '')::text AS packet_status, a.expires_at AS packet_expires_at,
       coalesce(a.approver_role, '')::text AS approver_role
FROM action_links l
JOIN proposals p ON p.workspace_id = l.workspace_id AND p.id = l.proposal_id
LEFT JOIN approvals a ON a.workspace_id = l.workspace_id AND a.id = l.approval_id
WHERE l.workspace_id = sqlc.arg(workspace_id) AND l.token_hash = sqlc.arg(token_hash);

-- name: UseActionLink :execrows
-- The link is used, once: 0 rows when it was used before or expired.
UPDATE action_links SET used_at = now(), used_for = sqlc.arg(used_for)
WHERE workspace_id = sqlc.arg(workspace_id) AND token_hash = sqlc.arg(token_hash) AND used_at IS NULL AND expires_at > now();

-- name: DeleteExpiredActionLinks :execrows
-- The sweeper forgets links a day after they expired.
DELETE FROM action_links WHERE expires_at < now() - interval '1 day';

-- name: DeleteOldRationaleAlerts :execrows
-- The sweeper forgets which callers were alerted, a week on.
DELETE FROM rationale_alerts WHERE day < (now() AT TIME ZONE 'UTC')::date - 7;
