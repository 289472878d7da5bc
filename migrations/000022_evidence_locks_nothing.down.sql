DROP TRIGGER api_tokens_clear_audit_actor ON api_tokens;
DROP FUNCTION gatehouse_token_deleted();
DROP TRIGGER users_clear_audit_actor ON users;
DROP FUNCTION gatehouse_user_deleted();
DROP TRIGGER workspaces_delete_evidence ON workspaces;
DROP FUNCTION gatehouse_workspace_deleted();

-- Evidence written while the keys were gone may name rows deleted since:
-- such rows are dropped or cleared first, as the keys would have done.
DELETE FROM audit_events a WHERE NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = a.workspace_id);
UPDATE audit_events a SET actor_user_id = NULL
WHERE actor_user_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = a.actor_user_id);
UPDATE audit_events a SET actor_token_id = NULL
WHERE actor_token_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM api_tokens t WHERE t.id = a.actor_token_id);
DELETE FROM receipts r WHERE NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = r.workspace_id);

ALTER TABLE audit_events
    ADD CONSTRAINT audit_events_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE,
    ADD CONSTRAINT audit_events_actor_user_id_fkey FOREIGN KEY (actor_user_id) REFERENCES users (id) ON DELETE SET NULL,
    ADD CONSTRAINT audit_events_actor_token_id_fkey FOREIGN KEY (actor_token_id) REFERENCES api_tokens (id) ON DELETE SET NULL;
ALTER TABLE receipts
    ADD CONSTRAINT receipts_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE;
