-- The audit log page reads a workspace's rows newest first (keyset on id),
-- filtered by actor, action or object (a subject id, or the proposal or
-- packet a row names in its data). Without these, every filter scanned the
-- workspace's whole log.
CREATE INDEX audit_events_workspace_id_idx ON audit_events (workspace_id, id);
CREATE INDEX audit_events_actor_idx ON audit_events (workspace_id, actor_user_id, id);
CREATE INDEX audit_events_action_idx ON audit_events (workspace_id, action, id);
CREATE INDEX audit_events_object_idx ON audit_events (workspace_id, subject_id, id);
CREATE INDEX audit_events_proposal_idx ON audit_events (workspace_id, (data->>'proposal_id'), id);
CREATE INDEX audit_events_approval_idx ON audit_events (workspace_id, (data->>'approval_id'), id);
CREATE INDEX audit_events_scope_idx ON audit_events (workspace_id, (data->>'scope_id'), id);
