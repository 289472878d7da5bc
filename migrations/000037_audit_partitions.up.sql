-- The audit log is partitioned by when its rows expire, so that retention
-- drops whole partitions instead of deleting row by row, and each filter of
-- the audit page reads an index (issue 32, items 2 and 3).
--
-- Layout: two levels.
-- 1. The retention band, LIST on gatehouse_audit_band(created_at,
--    retention_until): 'short' for rows kept two years or less (the 30-day
--    and 1-year classes, and a tool's own retention up to two years),
--    'long' for the others (7 and 10 years).
-- 2. retention_until, RANGE, by UTC calendar month in the short band
--    (audit_events_m202711: the short rows kept until some time in
--    November 2027) and by UTC year in the long band (audit_events_y2033).
-- Once its period is over, every row of a partition is past its
-- retention, by the partition's own bound: `audit purge` detaches and
-- drops it (internal/audit/partitions.go). No row is ever dropped before
-- its retention_until; a short row is kept at most a month longer, a long
-- row at most a year longer (8 years instead of 7, 11 instead of 10).
--
-- Why two levels: by month of expiry alone, the rows of the long classes
-- spread over the next ten years' months, about 120 partitions, and every
-- audit page query (none can leave a partition out: it reads by id, and
-- partitions hold the ids of several classes) plans each of them: 25 ms of
-- planning at 127 partitions against 1 ms at 17, measured. The band gives
-- the long rows yearly partitions: about 15 short and 11 long at most.
-- The band is an expression of the row's own columns, because the calls'
-- statements (queries/proposals.sql) write only retention_until, and a
-- partition key cannot be a generated column. The band only chooses the
-- granularity; the drop rests on the bound on retention_until.
--
-- Keys: a partitioned table keyed by an expression cannot have a primary
-- or unique key, so audit_events itself has none; each band has its
-- primary key (id, retention_until) (audit_events_pkey_short, _long),
-- which every partition copies: ids are unique by their identity, looked
-- up through these. The id stays a bigint identity of audit_events:
-- inserts go through it (a partition has no identity in PostgreSQL 15, so
-- an insert straight into one fails for want of an id), taking its
-- RowExclusiveLock before drawing an id, so the roll-up's watermark
-- (gatehouse_table_writers(to_regclass('audit_events')), migration 30)
-- reads the same locks as before.
--
-- Partitions are created ahead by the server (audit.MaintainPartitions: at
-- start and every hour, the periods of the rows written this month and the
-- next two, for every retention its tools declare) through
-- gatehouse_audit_partition below, idempotent and serialized by an
-- advisory lock, so several instances can run it. A row whose period has
-- no partition goes to its band's DEFAULT partition, so an insert never
-- fails; creating the period's partition moves those rows into it.
--
-- Indexes, all per partition. A call's two audit rows (proposal.created
-- and proposal.applied) were 6 index entries: the primary key, the object
-- index and the retention index, each twice; they are 7 now.
-- - audit_events_pkey_* (id, retention_until): the roll-up's id ranges,
--   the audit page without filters, a time range's ids.
-- - audit_events_object_idx (workspace_id, subject_id, id), and one
--   partial index per data key the object filter reads (proposal_id,
--   approval_id, scope_id), holding only the rows that have the key: the
--   object filter is a bitmap OR of the four. A call's proposal.created
--   names its scope (one entry); the other keys are written by packets,
--   settlements and evidence. Statistics on the three expressions (which
--   partial indexes do not give the planner) tell a call's id, met on a
--   few rows, from a conversation's, met on every call of it.
-- - audit_events_action_idx (workspace_id, action, id), without the rows
--   of the two actions every call writes: filtering by proposal.created or
--   proposal.applied finds a page among the newest rows at once (about
--   half the log is one or the other); any other action reads its range.
-- - audit_events_actor_idx (workspace_id, actor_user_id, id), without the
--   system's rows (no actor).
-- - No index on created_at: ids follow time, so a time range is an id
--   range, which audit_hours below gives (each hour's smallest and largest
--   id, per workspace, folded off the call path); the page then reads the
--   ids in that range through the indexes above, newest first, and checks
--   created_at on each.
-- - audit_events_retention_idx (retention_until) is gone: purge reads the
--   partitions' bounds. The default partitions alone keep one, to find
--   their periods when they have rows.

-- Nothing writes the log while it moves.
LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE;

ALTER TABLE audit_events RENAME TO audit_events_unpartitioned;
ALTER SEQUENCE audit_events_id_seq RENAME TO audit_events_unpartitioned_id_seq;
ALTER INDEX audit_events_pkey RENAME TO audit_events_unpartitioned_pkey;
ALTER INDEX audit_events_object_idx RENAME TO audit_events_unpartitioned_object_idx;
ALTER INDEX audit_events_retention_idx RENAME TO audit_events_unpartitioned_retention_idx;
ALTER INDEX audit_events_rationale_fts_idx RENAME TO audit_events_unpartitioned_rationale_fts_idx;
ALTER INDEX audit_events_refused_idx RENAME TO audit_events_unpartitioned_refused_idx;

-- The band of a row: 'long' when it is kept more than two years (or its
-- times are infinite, which no interval holds), 'short' otherwise.
CREATE FUNCTION gatehouse_audit_band(created_at timestamptz, retention_until timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN NOT (isfinite(created_at) AND isfinite(retention_until)) THEN 'long'
                WHEN retention_until - created_at > interval '730 days' THEN 'long'
                ELSE 'short' END
$$;

CREATE TABLE audit_events (
    id              bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    workspace_id    uuid NOT NULL,
    actor_kind      actor_kind NOT NULL,
    actor_user_id   uuid,
    actor_token_id  uuid,
    action          audit_action NOT NULL,
    subject_type    text NOT NULL,
    subject_id      text NOT NULL,
    data            jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    retention_until timestamptz NOT NULL DEFAULT now() + interval '365 days'
) PARTITION BY LIST (gatehouse_audit_band(created_at, retention_until));

-- As migration 21: lz4 where the server has it (partitions copy it).
DO $$
BEGIN
    ALTER TABLE audit_events ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available: audit data stays compressed with pglz';
END $$;

-- What the planner knows of the object keys (their partial indexes give it
-- no statistics): whether an id is a call's, met on a few rows, or a
-- conversation's, on every call of it, decides between reading the
-- object's rows and walking the log newest first. Partitions copy these
-- (LIKE ... INCLUDING STATISTICS); the default partitions have their own.
CREATE STATISTICS audit_events_proposal_stats ON (data->>'proposal_id') FROM audit_events;
CREATE STATISTICS audit_events_approval_stats ON (data->>'approval_id') FROM audit_events;
CREATE STATISTICS audit_events_scope_stats ON (data->>'scope_id') FROM audit_events;

-- The bands and their default partitions. (Created by EXECUTE: queries
-- name only audit_events, and sqlc would make a model of each partition.)
DO $$
BEGIN
    EXECUTE 'CREATE TABLE audit_events_short PARTITION OF audit_events FOR VALUES IN (''short'') PARTITION BY RANGE (retention_until)';
    EXECUTE 'CREATE TABLE audit_events_long PARTITION OF audit_events FOR VALUES IN (''long'') PARTITION BY RANGE (retention_until)';
    EXECUTE 'CREATE TABLE audit_events_short_default PARTITION OF audit_events_short DEFAULT';
    EXECUTE 'CREATE TABLE audit_events_long_default PARTITION OF audit_events_long DEFAULT';
END $$;
CREATE INDEX audit_events_short_default_retention_idx ON audit_events_short_default (retention_until);
CREATE INDEX audit_events_long_default_retention_idx ON audit_events_long_default (retention_until);
CREATE STATISTICS audit_events_short_default_proposal_stats ON (data->>'proposal_id') FROM audit_events_short_default;
CREATE STATISTICS audit_events_short_default_approval_stats ON (data->>'approval_id') FROM audit_events_short_default;
CREATE STATISTICS audit_events_short_default_scope_stats ON (data->>'scope_id') FROM audit_events_short_default;
CREATE STATISTICS audit_events_long_default_proposal_stats ON (data->>'proposal_id') FROM audit_events_long_default;
CREATE STATISTICS audit_events_long_default_approval_stats ON (data->>'approval_id') FROM audit_events_long_default;
CREATE STATISTICS audit_events_long_default_scope_stats ON (data->>'scope_id') FROM audit_events_long_default;

-- Names a partition's copies of the indexes after the index they copy
-- (audit_events_object_idx_m202611, audit_events_pkey_y2033,
-- audit_events_pkey_short_default), so that a plan says which it reads.
CREATE FUNCTION gatehouse_audit_name_indexes(part regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    suffix text := substr((SELECT relname FROM pg_class WHERE oid = part), length('audit_events_') + 1);
    r record;
    want text;
BEGIN
    FOR r IN
        WITH RECURSIVE up (child, idx) AS (
            SELECT x.indexrelid, x.indexrelid FROM pg_index x WHERE x.indrelid = part
            UNION ALL
            SELECT up.child, h.inhparent FROM up JOIN pg_inherits h ON h.inhrelid = up.idx
        )
        SELECT c.relname AS child, t.relname AS top
        FROM up
        JOIN pg_class c ON c.oid = up.child
        JOIN pg_class t ON t.oid = up.idx
        WHERE up.idx <> up.child AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = up.idx)
    LOOP
        want := regexp_replace(r.top, '_(short|long)$', '') || '_' || suffix;
        IF r.child <> want THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', r.child, want);
        END IF;
    END LOOP;
END $$;

-- A period of a band: the partition of the rows of that band expiring in
-- the month (short) or year (long) of expiring, UTC, and its bounds.
CREATE FUNCTION gatehouse_audit_period(band text, expiring date, OUT part text, OUT lo timestamptz, OUT hi timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    first date;
BEGIN
    CASE band
    WHEN 'short' THEN
        first := date_trunc('month', expiring::timestamp)::date;
        part := 'audit_events_m' || to_char(first, 'YYYYMM');
        hi := (first + interval '1 month')::timestamp AT TIME ZONE 'UTC';
    WHEN 'long' THEN
        first := date_trunc('year', expiring::timestamp)::date;
        part := 'audit_events_y' || to_char(first, 'YYYY');
        hi := (first + interval '1 year')::timestamp AT TIME ZONE 'UTC';
    ELSE
        RAISE EXCEPTION 'no audit band %', band;
    END CASE;
    lo := first::timestamp AT TIME ZONE 'UTC';
END $$;

-- One maintainer at a time: partitions are created, detached and dropped
-- under this transaction-level advisory lock (on every instance, and by
-- `audit purge`). Then a relation lock, which (unlike an advisory lock)
-- makes the transaction read the catalog as the previous holder left it.
CREATE FUNCTION gatehouse_audit_partitions_lock() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7274003301);
    LOCK TABLE audit_events_short_default, audit_events_long_default IN ACCESS SHARE MODE;
END $$;

-- Ensures the partition of a band's rows expiring in the period of
-- expiring exists, and says whether it created it. Rows of that period
-- that went to the band's default partition meanwhile move into it (with
-- the default partition locked, so none arrives during the move). The
-- partition is created apart and attached, which takes a SHARE UPDATE
-- EXCLUSIVE lock on the band (CREATE TABLE ... PARTITION OF would take
-- ACCESS EXCLUSIVE, blocking every insert): inserts go on, except into
-- the default partition, which ATTACH scans. A lock that cannot be had
-- within 5 s fails the call; the next turn tries again.
CREATE FUNCTION gatehouse_audit_partition(band text, expiring date) RETURNS boolean
LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
    p record := gatehouse_audit_period(band, expiring);
    fallback text := 'audit_events_' || band || '_default';
BEGIN
    IF to_regclass(p.part) IS NOT NULL THEN
        RETURN false;
    END IF;
    PERFORM gatehouse_audit_partitions_lock();
    IF to_regclass(p.part) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', fallback);
    EXECUTE format('CREATE TABLE %I (LIKE audit_events INCLUDING COMPRESSION INCLUDING STATISTICS)', p.part);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE retention_until >= $1 AND retention_until < $2 RETURNING *)
                    INSERT INTO %I SELECT * FROM moved ORDER BY id', fallback, p.part) USING p.lo, p.hi;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', 'audit_events_' || band, p.part, p.lo, p.hi);
    PERFORM gatehouse_audit_name_indexes(p.part::regclass);
    RETURN true;
END $$;

-- The periods (band, first day) of the rows in the default partitions,
-- found through their retention indexes, one probe a period.
CREATE FUNCTION gatehouse_audit_default_periods() RETURNS TABLE (band text, expiring date)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE s (first) AS (
        SELECT date_trunc('month', min(d.retention_until) AT TIME ZONE 'UTC')::date
        FROM audit_events_short_default d WHERE d.retention_until > '-infinity' AND d.retention_until < 'infinity'
        UNION ALL
        SELECT (SELECT date_trunc('month', min(d.retention_until) AT TIME ZONE 'UTC')::date
                FROM audit_events_short_default d
                WHERE d.retention_until >= (s.first + interval '1 month')::timestamp AT TIME ZONE 'UTC' AND d.retention_until < 'infinity')
        FROM s WHERE s.first IS NOT NULL
    ), l (first) AS (
        SELECT date_trunc('year', min(d.retention_until) AT TIME ZONE 'UTC')::date
        FROM audit_events_long_default d WHERE d.retention_until > '-infinity' AND d.retention_until < 'infinity'
        UNION ALL
        SELECT (SELECT date_trunc('year', min(d.retention_until) AT TIME ZONE 'UTC')::date
                FROM audit_events_long_default d
                WHERE d.retention_until >= (l.first + interval '1 year')::timestamp AT TIME ZONE 'UTC' AND d.retention_until < 'infinity')
        FROM l WHERE l.first IS NOT NULL
    )
    SELECT 'short', first FROM s WHERE first IS NOT NULL
    UNION ALL
    SELECT 'long', first FROM l WHERE first IS NOT NULL
$$;

-- Detaches the partition of a band's period, once that period ended by
-- expired_by (so every row in it is past its retention). Not
-- CONCURRENTLY: PostgreSQL refuses it while a default partition exists,
-- and in a transaction. A plain DETACH takes an ACCESS EXCLUSIVE lock on
-- the band for the moment it takes (it reads no rows); within 5 s or it
-- fails and purge can be run again. Says whether it detached (false: not
-- attached, or no such partition).
CREATE FUNCTION gatehouse_audit_detach(band text, expiring date, expired_by timestamptz) RETURNS boolean
LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
    p record := gatehouse_audit_period(band, expiring);
BEGIN
    IF p.hi > expired_by THEN
        RAISE EXCEPTION 'audit partition % holds rows kept until %', p.part, p.hi;
    END IF;
    PERFORM gatehouse_audit_partitions_lock();
    IF NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(p.part) AND inhparent = ('audit_events_' || band)::regclass) THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', 'audit_events_' || band, p.part);
    RETURN true;
END $$;

-- Drops the detached partition of a band's period (ended by expired_by)
-- and says how many rows it held; 0 when there is none.
CREATE FUNCTION gatehouse_audit_drop(band text, expiring date, expired_by timestamptz) RETURNS bigint
LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
    p record := gatehouse_audit_period(band, expiring);
    n bigint;
BEGIN
    IF p.hi > expired_by THEN
        RAISE EXCEPTION 'audit partition % holds rows kept until %', p.part, p.hi;
    END IF;
    PERFORM gatehouse_audit_partitions_lock();
    IF to_regclass(p.part) IS NULL THEN
        RETURN 0;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(p.part)) THEN
        RAISE EXCEPTION 'audit partition % is attached: detach it first', p.part;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I', p.part) INTO n;
    EXECUTE format('DROP TABLE %I', p.part);
    RETURN n;
END $$;

-- A partition for every period the existing rows expire in, and for the
-- rows of the four retention classes written this month and the next two
-- (the server keeps this up from now on, for the retentions its tools
-- declare).
SELECT gatehouse_audit_partition(x.band, x.expiring)
FROM (
    SELECT DISTINCT gatehouse_audit_band(created_at, retention_until) AS band,
           date_trunc('month', retention_until AT TIME ZONE 'UTC')::date AS expiring
    FROM audit_events_unpartitioned
    WHERE isfinite(retention_until) AND isfinite(created_at)
    UNION
    SELECT CASE WHEN r > interval '730 days' THEN 'long' ELSE 'short' END, date_trunc('month', d + r)::date
    FROM generate_series(date_trunc('month', now() AT TIME ZONE 'UTC'), date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months', interval '1 day') AS d,
         unnest(ARRAY[interval '30 days', interval '365 days', interval '2555 days', interval '3650 days']) AS r
) x
ORDER BY x.band, x.expiring;

-- The rows, with their ids; the identity goes on from where it was.
INSERT INTO audit_events OVERRIDING SYSTEM VALUE
SELECT * FROM audit_events_unpartitioned ORDER BY id;
SELECT setval(pg_get_serial_sequence('audit_events', 'id'), s.last_value, s.is_called)
FROM audit_events_unpartitioned_id_seq s;
DROP TABLE audit_events_unpartitioned;

-- The keys and indexes, built once the rows are in (each partition's at
-- once).
ALTER TABLE audit_events_short ADD CONSTRAINT audit_events_pkey_short PRIMARY KEY (id, retention_until);
ALTER TABLE audit_events_long ADD CONSTRAINT audit_events_pkey_long PRIMARY KEY (id, retention_until);
CREATE INDEX audit_events_object_idx ON audit_events (workspace_id, subject_id, id);
CREATE INDEX audit_events_proposal_idx ON audit_events (workspace_id, (data->>'proposal_id'), id) WHERE (data->>'proposal_id') IS NOT NULL;
CREATE INDEX audit_events_approval_idx ON audit_events (workspace_id, (data->>'approval_id'), id) WHERE (data->>'approval_id') IS NOT NULL;
CREATE INDEX audit_events_scope_idx ON audit_events (workspace_id, (data->>'scope_id'), id) WHERE (data->>'scope_id') IS NOT NULL;
CREATE INDEX audit_events_action_idx ON audit_events (workspace_id, action, id) WHERE action NOT IN ('proposal.created', 'proposal.applied');
CREATE INDEX audit_events_actor_idx ON audit_events (workspace_id, actor_user_id, id) WHERE actor_user_id IS NOT NULL;
CREATE INDEX audit_events_rationale_fts_idx ON audit_events USING gin (to_tsvector('simple', coalesce(data->>'rationale', '')))
    WHERE action = 'proposal.refused';
CREATE INDEX audit_events_refused_idx ON audit_events (workspace_id, created_at) WHERE action = 'proposal.refused';
SELECT gatehouse_audit_name_indexes(c.oid)
FROM pg_partition_tree('audit_events') t JOIN pg_class c ON c.oid = t.relid
WHERE t.level > 0;

-- The audit page's time filter reads ids: each hour's (UTC) smallest and
-- largest audit row id, per workspace. audit.FoldHours adds the rows
-- after audit_hours_folded.folded_to, up to the roll-up's audit_events
-- watermark (rollup_feeds, migration 30), below which no id can still
-- commit: every row with an id up to folded_to is counted in its hour.
-- The page reads the rows after folded_to directly (seconds of rows). A
-- row deleted later leaves its hour's range as it was: a range a little
-- wider than its rows, never narrower.
CREATE TABLE audit_hours (
    workspace_id uuid NOT NULL,
    hour         timestamp NOT NULL,
    min_id       bigint NOT NULL,
    max_id       bigint NOT NULL,
    -- A range of hours is read from the index alone.
    PRIMARY KEY (workspace_id, hour) INCLUDE (min_id, max_id),
    CHECK (min_id <= max_id)
);
CREATE TABLE audit_hours_folded (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    folded_to bigint NOT NULL CHECK (folded_to >= 0)
);
-- Nothing writes the log now: every row is here.
INSERT INTO audit_hours (workspace_id, hour, min_id, max_id)
SELECT workspace_id, date_trunc('hour', created_at AT TIME ZONE 'UTC'), min(id), max(id)
FROM audit_events
GROUP BY 1, 2;
INSERT INTO audit_hours_folded (folded_to) SELECT coalesce(max(id), 0) FROM audit_events;
