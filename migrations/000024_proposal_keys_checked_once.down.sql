ALTER TABLE proposals
    DROP CONSTRAINT proposals_conversation_scope_fkey,
    DROP CONSTRAINT proposals_notebook_scope_fkey,
    DROP CONSTRAINT proposals_proposer_is_owner,
    ADD CONSTRAINT proposals_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations (id) ON DELETE CASCADE,
    ADD CONSTRAINT proposals_notebook_id_fkey FOREIGN KEY (notebook_id) REFERENCES notebooks (id) ON DELETE CASCADE,
    ADD CONSTRAINT proposals_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE,
    ADD CONSTRAINT proposals_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES users (id) ON DELETE CASCADE,
    ADD CONSTRAINT proposals_proposed_by_user_id_fkey FOREIGN KEY (proposed_by_user_id) REFERENCES users (id) ON DELETE CASCADE;

ALTER TABLE notebooks DROP CONSTRAINT notebooks_scope_key;
ALTER TABLE conversations DROP CONSTRAINT conversations_scope_key;
