-- name: InsertAuditEvent :one
INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id, data, retention_until)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING *;

-- name: ListAuditEventsForSubject :many
SELECT * FROM audit_events
WHERE workspace_id = $1 AND subject_type = $2 AND subject_id = $3
ORDER BY id;

-- The partitions (migration 37): audit_events is partitioned by retention
-- band (short: kept two years or less; long: more), then by the UTC month
-- (short: audit_events_mYYYYMM) or year (long: audit_events_yYYYY) its
-- rows expire in, with a default partition per band for rows whose period
-- has none yet. The DDL is in the migration's functions; these run each in
-- a transaction of its own.

-- name: EnsureAuditPartition :one
-- Creates the partition of the band's rows expiring in the period of
-- expiring, moving that period's rows out of the band's default
-- partition, unless it exists; says whether it created it.
SELECT gatehouse_audit_partition(sqlc.arg(band)::text, sqlc.arg(expiring)::date)::boolean AS created;

-- name: AuditPartitionName :one
-- The name of the band's partition for the period of expiring.
SELECT (gatehouse_audit_period(sqlc.arg(band)::text, sqlc.arg(expiring)::date)).part::text AS part;

-- name: AuditDefaultPeriods :many
-- The periods (band, first day) of the rows in the default partitions.
SELECT p.band::text AS band, p.expiring::date AS expiring FROM gatehouse_audit_default_periods() AS p;

-- name: ListAuditPartitions :many
-- Every period's partition, attached or detached (a purge that stopped
-- between its detach and its drop), by band and period.
SELECT (CASE substr(c.relname, length('audit_events_') + 1, 1) WHEN 'm' THEN 'short' ELSE 'long' END)::text AS band,
       (CASE substr(c.relname, length('audit_events_') + 1, 1) WHEN 'm' THEN to_date(substr(c.relname, length('audit_events_m') + 1), 'YYYYMM')
             ELSE to_date(substr(c.relname, length('audit_events_y') + 1), 'YYYY') END)::date AS expiring,
       c.relispartition AS attached
FROM pg_catalog.pg_class c
WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace AND c.relname ~ '^audit_events_(m[0-9]{6}|y[0-9]{4})$'
ORDER BY 1, 2;

-- name: DetachAuditPartition :one
-- Detaches the partition of the band's period of expiring, which must
-- have ended by expired_by; says whether it was attached.
SELECT gatehouse_audit_detach(sqlc.arg(band)::text, sqlc.arg(expiring)::date, sqlc.arg(expired_by)::timestamptz)::boolean AS detached;

-- name: DropAuditPartition :one
-- Drops the detached partition of the band's period of expiring (ended by
-- expired_by) and says how many rows it held.
SELECT gatehouse_audit_drop(sqlc.arg(band)::text, sqlc.arg(expiring)::date, sqlc.arg(expired_by)::timestamptz)::bigint AS rows;

-- name: FoldAuditHours :one
-- Adds the audit rows after the hours' watermark (audit_hours_folded), up
-- to the roll-up's audit_events watermark (no id below it can still
-- commit) and at most max_ids ids on, to the id ranges of their hours;
-- says how many ids it moved the watermark by (0: nothing to fold, or
-- another instance is folding). Over every workspace: a background step.
WITH w AS (
    SELECT f.folded_to AS after, least(r.folded_to, f.folded_to + sqlc.arg(max_ids)::bigint) AS upto
    FROM audit_hours_folded f JOIN rollup_feeds r ON r.feed = 'audit_events'
    -- Locked only when there is something to fold: an idle turn writes
    -- nothing.
    WHERE r.folded_to > f.folded_to
    FOR UPDATE OF f SKIP LOCKED
), hours AS (
    SELECT a.workspace_id, date_trunc('hour', a.created_at AT TIME ZONE 'UTC') AS hour, min(a.id) AS min_id, max(a.id) AS max_id
    FROM w JOIN audit_events a ON a.id > w.after AND a.id <= w.upto
    GROUP BY 1, 2
), put AS (
    INSERT INTO audit_hours AS h (workspace_id, hour, min_id, max_id)
    SELECT workspace_id, hour, min_id, max_id FROM hours
    ON CONFLICT (workspace_id, hour) DO UPDATE
        SET min_id = least(h.min_id, EXCLUDED.min_id), max_id = greatest(h.max_id, EXCLUDED.max_id)
), moved AS (
    UPDATE audit_hours_folded f SET folded_to = w.upto FROM w WHERE w.upto > w.after
    RETURNING w.upto - w.after AS ids
)
SELECT coalesce((SELECT ids FROM moved), 0)::bigint AS folded;

-- name: ListAuditSpan :many
-- The audit rows with ids in (after, upto], oldest first, at most
-- max_rows (every workspace's: the export's global feed).
SELECT id, workspace_id, created_at, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id, data
FROM audit_events
WHERE id > sqlc.arg(after)::bigint AND id <= sqlc.arg(upto)::bigint
ORDER BY id
LIMIT sqlc.arg(max_rows);

-- name: LatestPolicyVersion :one
-- The policy version (the tool registry's hash) last recorded for the
-- workspace, through audit_events_action_idx; '' when none was.
SELECT coalesce((SELECT a.data->>'hash' FROM audit_events a
                 WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.action = 'policy.changed'
                 ORDER BY a.id DESC LIMIT 1), '')::text AS hash;
