-- A conversation's transcript lines no longer hold foreign keys to their
-- conversation, their proposal and their author.
--
-- Why: an automatic call writes its transcript line in the statement that
-- writes its proposal (RecordAutoCall). The proposal checks its
-- conversation and its owner already; the line's three checks repeated
-- them (and checked the proposal just inserted), each a query and a
-- KEY SHARE lock on the conversation and user rows that every call in the
-- conversation shares. Replaying the call's SQL with pgbench, they cost
-- about 15 % of its rate (alternating runs at 8 clients). The same
-- reasoning removed the audit rows' and receipts' keys (migration 22).
--
-- What stays true: a line names a conversation and a user that its
-- writer has just read, in its transaction (a call's line is written
-- with its proposal, which keeps its keys; a chat message with the
-- conversation it was read from). Deleting what a line names does what
-- the keys did, by parent-side triggers: a conversation or a proposal
-- takes its lines with it, a deleted user is cleared as their author.
ALTER TABLE messages
    DROP CONSTRAINT messages_conversation_id_fkey,
    DROP CONSTRAINT messages_proposal_id_fkey,
    DROP CONSTRAINT messages_author_user_id_fkey;

CREATE FUNCTION gatehouse_conversations_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM messages m USING gone WHERE m.conversation_id = gone.id;
    RETURN NULL;
END $$;
CREATE TRIGGER conversations_delete_lines AFTER DELETE ON conversations
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_conversations_deleted();

-- A proposal is deleted only with its conversation or notebook (or its
-- workspace or owner); one statement takes all their lines at once.
CREATE FUNCTION gatehouse_proposals_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM messages m USING gone WHERE m.proposal_id = gone.id;
    RETURN NULL;
END $$;
CREATE TRIGGER proposals_delete_lines AFTER DELETE ON proposals
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_proposals_deleted();

-- A deleted user is cleared from the lines they wrote, as from the audit
-- rows that named them (the trigger of migration 22).
CREATE OR REPLACE FUNCTION gatehouse_user_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_user_id = NULL WHERE actor_user_id = OLD.id;
    UPDATE messages SET author_user_id = NULL WHERE author_user_id = OLD.id;
    RETURN NULL;
END $$;
