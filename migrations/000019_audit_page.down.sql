DROP INDEX IF EXISTS audit_events_scope_idx;
DROP INDEX IF EXISTS audit_events_approval_idx;
DROP INDEX IF EXISTS audit_events_proposal_idx;
DROP INDEX IF EXISTS audit_events_object_idx;
DROP INDEX IF EXISTS audit_events_action_idx;
DROP INDEX IF EXISTS audit_events_actor_idx;
DROP INDEX IF EXISTS audit_events_workspace_id_idx;
