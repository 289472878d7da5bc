-- A conversation's tool lines are its calls themselves, not copies of them
-- in messages.
--
-- Why: every call in a conversation wrote a messages row (its tool name,
-- its proposal, its owner) besides its proposal: a heap row and two index
-- entries, three of a call's WAL records, for what the proposal already
-- says. Now a conversation's call draws its line position from the
-- messages' own sequence as it is inserted (proposals.line_id), and the
-- transcript (transcript_lines) is the conversation's messages and its
-- calls, merged by position: the same positions, cursors and order as
-- before, read through two index ranges.
--
-- What stays true: positions are unique and increasing across messages and
-- calls alike (one sequence), so every page, cursor and "newer/older"
-- probe reads as before; a call's line goes with the call.

-- Nothing writes calls or lines meanwhile.
LOCK TABLE proposals, messages IN SHARE MODE;

-- Every call draws one (a notebook's too: it is simply not in a
-- transcript), by default, so no insert has to say so; a sequence writes
-- WAL once every 32 values.
ALTER TABLE proposals ADD COLUMN line_id bigint;
UPDATE proposals p SET line_id = m.id FROM messages m WHERE m.proposal_id = p.id AND m.role = 'tool';
UPDATE proposals SET line_id = nextval('messages_id_seq') WHERE line_id IS NULL;
ALTER TABLE proposals ALTER COLUMN line_id SET DEFAULT nextval('messages_id_seq'), ALTER COLUMN line_id SET NOT NULL;

DELETE FROM messages WHERE role = 'tool';
ALTER TABLE messages ADD CONSTRAINT messages_no_tool_lines CHECK (role <> 'tool');
DROP TRIGGER proposals_delete_lines ON proposals;
DROP FUNCTION gatehouse_proposals_deleted();

-- A conversation's calls by position: the transcript's range, and the
-- conversation's latest calls (replacing the same range by created_at).
DROP INDEX proposals_conversation_idx;
CREATE INDEX proposals_conversation_idx ON proposals (workspace_id, conversation_id, line_id) WHERE conversation_id IS NOT NULL;

-- The transcript: the conversation's messages and its calls' lines. A
-- WHERE on workspace, conversation and id and an ORDER BY id reach both
-- branches, each an index range (messages_conversation_idx,
-- proposals_conversation_idx), merged.
-- (A notebook's calls are in it with no conversation, so no read of a
-- conversation finds them. The branches have no WHERE and compute no
-- domain value: PostgreSQL merges only such branches by position;
-- others it reads whole and sorts.)
CREATE VIEW transcript_lines AS
SELECT m.id, m.workspace_id, m.conversation_id, m.role::text AS role, m.content::text AS content, m.proposal_id, m.author_user_id, m.created_at
FROM messages m
UNION ALL
SELECT p.line_id, p.workspace_id, p.conversation_id, 'tool', p.tool, p.id, p.owner_id, p.created_at
FROM proposals p;
