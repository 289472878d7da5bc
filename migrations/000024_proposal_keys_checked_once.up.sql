-- A proposal checks its scope, workspace and owner with one foreign key
-- instead of four, and its proposer with a CHECK instead of a fifth.
--
-- Why: every automatic call inserts a proposal, and each foreign key on
-- it is checked when the row is written: a query and a KEY SHARE lock on
-- the row it names, shared by every concurrent call in the conversation
-- (MultiXacts). A proposal named its conversation (or notebook), its
-- workspace, its owner and its proposer (the owner again) with four such
-- checks; dropping the proposal's and the tool's keys altogether took
-- PostgreSQL's CPU per call from about 1.5 ms to 1.2 ms (alternating runs
-- at 8 clients), and these four are half of them. Migrations 22 and 23
-- did the same for the rows written with the proposal.
--
-- What stays true, and is stronger than before:
-- - A proposal's scope exists, in the proposal's workspace, owned by the
--   proposal's owner: (conversation_id | notebook_id, workspace_id,
--   owner_id) references the scope's (id, workspace_id, owner_id). Before,
--   each column was checked alone, and a proposal could have named a
--   conversation of another workspace or owner.
-- - The workspace and the owner exist: the scope references both.
-- - The proposer is the owner (the service proposes for the scope's owner
--   only; proposals.go); a CHECK says so, where a key checked the user
--   row a second time.
-- - Deletes do what they did: a scope takes its proposals (ON DELETE
--   CASCADE), and a workspace or a user takes its scopes, so theirs too.
--   A scope's id, workspace and owner never change (an update of them is
--   refused while a proposal names them).
ALTER TABLE conversations ADD CONSTRAINT conversations_scope_key UNIQUE (id, workspace_id, owner_id);
ALTER TABLE notebooks ADD CONSTRAINT notebooks_scope_key UNIQUE (id, workspace_id, owner_id);

ALTER TABLE proposals
    DROP CONSTRAINT proposals_conversation_id_fkey,
    DROP CONSTRAINT proposals_notebook_id_fkey,
    DROP CONSTRAINT proposals_workspace_id_fkey,
    DROP CONSTRAINT proposals_owner_id_fkey,
    DROP CONSTRAINT proposals_proposed_by_user_id_fkey,
    ADD CONSTRAINT proposals_conversation_scope_fkey FOREIGN KEY (conversation_id, workspace_id, owner_id)
        REFERENCES conversations (id, workspace_id, owner_id) ON DELETE CASCADE,
    ADD CONSTRAINT proposals_notebook_scope_fkey FOREIGN KEY (notebook_id, workspace_id, owner_id)
        REFERENCES notebooks (id, workspace_id, owner_id) ON DELETE CASCADE,
    ADD CONSTRAINT proposals_proposer_is_owner CHECK (proposed_by_user_id = owner_id);
