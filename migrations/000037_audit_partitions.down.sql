-- Back to one plain table, as the migrations before 37 left it: every row
-- (the default partitions' too) with its id, the identity going on from
-- where it was, the same indexes.
LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE;

-- The time filter's map of hours to ids.
DROP TABLE audit_hours_folded;
DROP TABLE audit_hours;

ALTER TABLE audit_events RENAME TO audit_events_partitioned;
ALTER SEQUENCE audit_events_id_seq RENAME TO audit_events_partitioned_id_seq;
ALTER INDEX audit_events_object_idx RENAME TO audit_events_partitioned_object_idx;
ALTER INDEX audit_events_rationale_fts_idx RENAME TO audit_events_partitioned_rationale_fts_idx;
ALTER INDEX audit_events_refused_idx RENAME TO audit_events_partitioned_refused_idx;

CREATE TABLE audit_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
);
DO $$
BEGIN
    ALTER TABLE audit_events ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available: audit data stays compressed with pglz';
END $$;

INSERT INTO audit_events OVERRIDING SYSTEM VALUE
SELECT * FROM audit_events_partitioned ORDER BY id;
SELECT setval(pg_get_serial_sequence('audit_events', 'id'), s.last_value, s.is_called)
FROM audit_events_partitioned_id_seq s;

CREATE INDEX audit_events_object_idx ON audit_events (workspace_id, subject_id, id);
CREATE INDEX audit_events_retention_idx ON audit_events (retention_until);
CREATE INDEX audit_events_rationale_fts_idx ON audit_events USING gin (to_tsvector('simple', coalesce(data->>'rationale', '')))
    WHERE action = 'proposal.refused';
CREATE INDEX audit_events_refused_idx ON audit_events (workspace_id, created_at) WHERE action = 'proposal.refused';

-- The partitions go with their parent; a partition that `audit purge`
-- detached but did not get to drop holds only rows past their retention.
DROP TABLE audit_events_partitioned;
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c
             WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace AND c.relname ~ '^audit_events_(m[0-9]{6}|y[0-9]{4})$'
    LOOP
        EXECUTE format('DROP TABLE %I', t);
    END LOOP;
END $$;

DROP FUNCTION gatehouse_audit_drop(text, date, timestamptz);
DROP FUNCTION gatehouse_audit_detach(text, date, timestamptz);
DROP FUNCTION gatehouse_audit_default_periods();
DROP FUNCTION gatehouse_audit_partition(text, date);
DROP FUNCTION gatehouse_audit_partitions_lock();
DROP FUNCTION gatehouse_audit_period(text, date);
DROP FUNCTION gatehouse_audit_name_indexes(regclass);
DROP FUNCTION gatehouse_audit_band(timestamptz, timestamptz);
