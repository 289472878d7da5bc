CREATE OR REPLACE FUNCTION gatehouse_token_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_token_id = NULL WHERE actor_token_id = OLD.id;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gatehouse_user_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_user_id = NULL WHERE actor_user_id = OLD.id;
    UPDATE messages SET author_user_id = NULL WHERE author_user_id = OLD.id;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gatehouse_workspace_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM audit_events WHERE workspace_id = OLD.id;
    DELETE FROM receipts WHERE workspace_id = OLD.id;
    RETURN NULL;
END $$;

-- Rows written while the keys were gone may name rows deleted since: they
-- are dropped or cleared first, as the keys would have done.
DELETE FROM records r WHERE NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = r.workspace_id);
UPDATE proposals p SET proposed_by_token_id = NULL
WHERE proposed_by_token_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM api_tokens t WHERE t.id = p.proposed_by_token_id);
UPDATE proposals p SET resolved_by_user_id = NULL
WHERE resolved_by_user_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = p.resolved_by_user_id);

ALTER TABLE records ADD CONSTRAINT records_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE proposals
    ADD CONSTRAINT proposals_proposed_by_token_id_fkey FOREIGN KEY (proposed_by_token_id) REFERENCES api_tokens (id) ON DELETE SET NULL,
    ADD CONSTRAINT proposals_resolved_by_user_id_fkey FOREIGN KEY (resolved_by_user_id) REFERENCES users (id) ON DELETE SET NULL;
