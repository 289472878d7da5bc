-- Every hot table's key leads with its workspace, so that the schema can be
-- distributed by workspace_id on Citus without a redesign (issue 32, item
-- 6; docs/operations.md, "Past one PostgreSQL"). Three tables named their
-- workspace only through a parent: a transcript line through its
-- conversation, a chat tool call through its turn, a vote through its
-- approval. They carry it now, written by their inserts, and the indexes
-- their queries read lead with it. Each query on them filters by it
-- (db/workspace_queries_test.go).

ALTER TABLE messages ADD COLUMN workspace_id uuid;
UPDATE messages m SET workspace_id = c.workspace_id FROM conversations c WHERE c.id = m.conversation_id;
-- A line whose conversation is gone (no foreign key since migration 23):
-- its conversation's delete took it, so nothing is lost.
DELETE FROM messages WHERE workspace_id IS NULL;
ALTER TABLE messages ALTER COLUMN workspace_id SET NOT NULL;
DROP INDEX messages_conversation_idx;
CREATE INDEX messages_conversation_idx ON messages (workspace_id, conversation_id, id);

-- A deleted conversation takes its lines through the index above.
CREATE OR REPLACE FUNCTION gatehouse_conversations_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM messages m USING gone WHERE m.workspace_id = gone.workspace_id AND m.conversation_id = gone.id;
    RETURN NULL;
END $$;

ALTER TABLE chat_tool_calls ADD COLUMN workspace_id uuid;
UPDATE chat_tool_calls k SET workspace_id = t.workspace_id FROM chat_turns t WHERE t.id = k.turn_id;
ALTER TABLE chat_tool_calls ALTER COLUMN workspace_id SET NOT NULL;
ALTER TABLE chat_tool_calls DROP CONSTRAINT chat_tool_calls_pkey, ADD PRIMARY KEY (workspace_id, turn_id, tool_call_id);

ALTER TABLE approval_votes ADD COLUMN workspace_id uuid;
UPDATE approval_votes v SET workspace_id = a.workspace_id FROM approvals a WHERE a.id = v.approval_id;
ALTER TABLE approval_votes ALTER COLUMN workspace_id SET NOT NULL;
ALTER TABLE approval_votes DROP CONSTRAINT approval_votes_pkey, ADD PRIMARY KEY (workspace_id, approval_id, user_id);

-- A conversation's turns, read by workspace and conversation now.
DROP INDEX chat_turns_conversation_idx;
CREATE INDEX chat_turns_conversation_idx ON chat_turns (workspace_id, conversation_id, created_at);
DROP INDEX chat_turns_one_active_idx;
CREATE UNIQUE INDEX chat_turns_one_active_idx ON chat_turns (workspace_id, conversation_id) WHERE state IN ('running', 'waiting');

-- A conversation's calls (the shadow preview's history and classes).
-- proposals_notebook_idx stays: ListNotebooks still reads it by notebook.
DROP INDEX proposals_conversation_idx;
CREATE INDEX proposals_conversation_idx ON proposals (workspace_id, conversation_id, created_at);
