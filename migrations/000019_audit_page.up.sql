-- The audit log page filters by object: a call's or packet's whole
-- history. The subject index becomes (workspace_id, subject_id, id), which
-- answers "rows about this id" whatever their subject type, newest first,
-- and still serves the lookups by type and id. Other filters (actor,
-- action, time) read the log newest first by id and stop at a page: an
-- index for each would cost every call, which writes two audit rows, an
-- index entry per index, for a page admins open now and then.
CREATE INDEX audit_events_object_idx ON audit_events (workspace_id, subject_id, id);
DROP INDEX audit_events_subject_idx;
