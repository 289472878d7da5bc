-- Audit rows and receipts are evidence: they name a workspace, an actor
-- and a token, but they no longer hold foreign keys to them.
--
-- Why: a foreign key is checked when each row is written. The check is a
-- query that takes a KEY SHARE lock on the row it names. An automatic call
-- writes two audit rows and a receipt: seven such checks. Every call in a
-- workspace locks the same workspace row, user row and token row, so
-- concurrent calls share those locks (MultiXacts). Replaying the call's
-- SQL with pgbench, these seven checks cost about a fifth of its rate
-- (883 -> 1,118 transactions/s at 8 clients, alternating runs).
--
-- What stays true:
-- - The rows these columns name exist when the rows are written. Only
--   the service writes evidence, naming the workspace, user and token of
--   the principal it has just authenticated. A call's audit rows and
--   receipt are written in the statement or transaction that writes its
--   proposal, which keeps its foreign keys to the same rows: a call whose
--   workspace, user or token is gone still fails, whole.
-- - Deleting what evidence names does what the foreign keys did (the
--   product deletes none of these rows; an operator might): deleting a
--   workspace deletes its audit rows and receipts, and deleting a user or a
--   token clears it from the audit rows that named it. Parent-side
--   triggers do this; a delete is rare, a write is every call.
ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_workspace_id_fkey,
    DROP CONSTRAINT audit_events_actor_user_id_fkey,
    DROP CONSTRAINT audit_events_actor_token_id_fkey;
ALTER TABLE receipts DROP CONSTRAINT receipts_workspace_id_fkey;

CREATE FUNCTION gatehouse_workspace_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM audit_events WHERE workspace_id = OLD.id;
    DELETE FROM receipts WHERE workspace_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER workspaces_delete_evidence AFTER DELETE ON workspaces
    FOR EACH ROW EXECUTE FUNCTION gatehouse_workspace_deleted();

CREATE FUNCTION gatehouse_user_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_user_id = NULL WHERE actor_user_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER users_clear_audit_actor AFTER DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION gatehouse_user_deleted();

CREATE FUNCTION gatehouse_token_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_token_id = NULL WHERE actor_token_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER api_tokens_clear_audit_actor AFTER DELETE ON api_tokens
    FOR EACH ROW EXECUTE FUNCTION gatehouse_token_deleted();
