-- A conversation's transcript is read a page at a time (issue 32): the
-- page shows its latest lines, the REST list and the live feed page with
-- opaque cursors, a model turn reads its recent lines and the calls that
-- still wait.
--
-- Why: the page, its live fragment, the REST list and the chat context
-- each read every line and every proposal of the conversation. With 200k
-- calls the page took 49 s and 582 MB of HTML, the fragment 40 s to say
-- that nothing changed, and the server went from 229 MB to 3.3 GB.
--
-- - Lines are read by ranges of messages_conversation_idx
--   (conversation_id, id) with a LIMIT; messages have no workspace_id
--   (their conversation, checked first, is the workspace's), so that
--   index serves as it is.
-- - A page's cards are read by primary key (ListConversationCards).
-- - The calls that still wait in a conversation, for the model's context:
--   a partial index of the unresolved proposals only. An automatic call is
--   written resolved, so it never enters it.
-- - Cursors are signed with a key of the deployment (HMAC-SHA256), kept
--   here so that every instance shares it: an altered cursor, or one of
--   another conversation, user or direction, is refused. The key is made
--   of two random UUIDs (pg_strong_random: 244 random bits).
CREATE INDEX proposals_conversation_open_idx ON proposals (workspace_id, conversation_id, created_at)
    WHERE status IN ('pending', 'pending_approval', 'applying');

CREATE TABLE cursor_keys (
    id  smallint PRIMARY KEY CHECK (id = 1),
    key bytea NOT NULL CHECK (length(key) = 32)
);
INSERT INTO cursor_keys (id, key)
VALUES (1, decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
