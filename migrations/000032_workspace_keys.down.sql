DROP INDEX proposals_conversation_idx;
CREATE INDEX proposals_conversation_idx ON proposals (conversation_id, created_at);

DROP INDEX chat_turns_one_active_idx;
CREATE UNIQUE INDEX chat_turns_one_active_idx ON chat_turns (conversation_id) WHERE state IN ('running', 'waiting');
DROP INDEX chat_turns_conversation_idx;
CREATE INDEX chat_turns_conversation_idx ON chat_turns (conversation_id, created_at);

ALTER TABLE approval_votes DROP CONSTRAINT approval_votes_pkey, ADD PRIMARY KEY (approval_id, user_id);
ALTER TABLE approval_votes DROP COLUMN workspace_id;

ALTER TABLE chat_tool_calls DROP CONSTRAINT chat_tool_calls_pkey, ADD PRIMARY KEY (turn_id, tool_call_id);
ALTER TABLE chat_tool_calls DROP COLUMN workspace_id;

CREATE OR REPLACE FUNCTION gatehouse_conversations_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM messages m USING gone WHERE m.conversation_id = gone.id;
    RETURN NULL;
END $$;

DROP INDEX messages_conversation_idx;
CREATE INDEX messages_conversation_idx ON messages (conversation_id, id);
ALTER TABLE messages DROP COLUMN workspace_id;
