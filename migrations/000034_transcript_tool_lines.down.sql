DROP VIEW transcript_lines;
LOCK TABLE proposals, messages IN SHARE MODE;

DROP INDEX proposals_conversation_idx;
CREATE INDEX proposals_conversation_idx ON proposals (workspace_id, conversation_id, created_at);

CREATE FUNCTION gatehouse_proposals_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM messages m USING gone WHERE m.proposal_id = gone.id;
    RETURN NULL;
END $$;
CREATE TRIGGER proposals_delete_lines AFTER DELETE ON proposals
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_proposals_deleted();

ALTER TABLE messages DROP CONSTRAINT messages_no_tool_lines;
INSERT INTO messages (id, workspace_id, conversation_id, role, content, proposal_id, author_user_id, created_at) OVERRIDING SYSTEM VALUE
SELECT line_id, workspace_id, conversation_id, 'tool', tool, id, owner_id, created_at FROM proposals WHERE conversation_id IS NOT NULL;

ALTER TABLE proposals DROP COLUMN line_id;
