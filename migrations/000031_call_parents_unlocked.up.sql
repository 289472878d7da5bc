-- An automatic call no longer locks its token's, its decider's or its
-- workspace's row: the proposal's keys to its token and to the user who
-- resolved it, and the record's key to its workspace, are gone.
--
-- Why: each foreign key is checked when the row is written, with a KEY
-- SHARE lock on the row it names; locking a row writes a WAL record and
-- dirties its page, and the rows are the same for every concurrent call
-- of a token or workspace (MultiXacts). Measured with pg_walinspect over
-- 20 automatic records.put calls, these three checks were three of the
-- call's 37 WAL records (api_tokens, users and workspaces: Heap LOCK, one
-- each per call). Migrations 22, 23 and 24 did the same for the rows
-- written with the proposal.
--
-- What stays true: the proposal's scope key (migration 24) still checks
-- its conversation or notebook, workspace and owner. A proposal names the
-- token that the request authenticated with, in its transaction, and the
-- person who resolved it (the owner on the automatic path, whom the scope
-- key checks; on the other paths the signed-in decider). A record names
-- the workspace of the call that wrote it. Deletes do what the keys did,
-- by parent-side triggers: a deleted token or user is cleared from the
-- proposals that name them; a deleted workspace takes its records.
ALTER TABLE proposals
    DROP CONSTRAINT proposals_proposed_by_token_id_fkey,
    DROP CONSTRAINT proposals_resolved_by_user_id_fkey;
ALTER TABLE records DROP CONSTRAINT records_workspace_id_fkey;

CREATE OR REPLACE FUNCTION gatehouse_workspace_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM audit_events WHERE workspace_id = OLD.id;
    DELETE FROM receipts WHERE workspace_id = OLD.id;
    DELETE FROM records WHERE workspace_id = OLD.id;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gatehouse_user_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_user_id = NULL WHERE actor_user_id = OLD.id;
    UPDATE messages SET author_user_id = NULL WHERE author_user_id = OLD.id;
    UPDATE proposals SET resolved_by_user_id = NULL WHERE resolved_by_user_id = OLD.id;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gatehouse_token_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_token_id = NULL WHERE actor_token_id = OLD.id;
    UPDATE proposals SET proposed_by_token_id = NULL WHERE proposed_by_token_id = OLD.id;
    RETURN NULL;
END $$;
