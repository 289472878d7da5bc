CREATE INDEX audit_events_subject_idx ON audit_events (workspace_id, subject_type, subject_id, id);
DROP INDEX IF EXISTS audit_events_object_idx;
