-- The conversations list reads a page of an index instead of probing the
-- last line of every conversation the caller owns.
--
-- Why: the list is ordered by activity (a conversation's last line, or
-- its own last change), and nothing stored that order: the list probed
-- the transcript of each of the caller's conversations for its last line
-- and sorted them all, 8 ms for 1,000 conversations and growing with them
-- (issue 32). A call must not update its conversation's row to say so:
-- that row is the one every call in the conversation reads and locks
-- (its scope key), and they would queue on it.
--
-- How: conversation_activity holds each conversation's activity, with an
-- index in the list's order. The conversation's own changes (created,
-- renamed, its mode set) write it by trigger: they are rare. Its lines
-- are folded in off the call path by a roll-up feed (internal/rollup, the
-- 'transcript_lines' row of rollup_feeds) over the lines' positions, which
-- messages and calls draw from one sequence (messages_id_seq; migration
-- 34); the list reads the index plus the few lines after the feed's
-- watermark, in one snapshot. A BRIN index on proposals.line_id lets the
-- feed and the list find the calls after a position: the calls are
-- appended in position order, and a BRIN index writes nothing while its
-- newest range is unsummarized (a b-tree would add an entry, a WAL
-- record, to every call).
--
-- What stays true: the order is the one the list had (the later of the
-- conversation's last change and its last line), and a conversation's
-- deletion takes its activity row.
CREATE TABLE conversation_activity (
    conversation_id uuid PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    workspace_id    uuid NOT NULL,
    owner_id        uuid NOT NULL,
    active_at       timestamptz NOT NULL
);
CREATE INDEX conversation_activity_owner_idx ON conversation_activity (workspace_id, owner_id, active_at DESC, conversation_id DESC);

CREATE INDEX proposals_line_brin ON proposals USING brin (line_id) WITH (pages_per_range = 8, autosummarize = on);

CREATE FUNCTION gatehouse_conversation_touched() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO conversation_activity (conversation_id, workspace_id, owner_id, active_at)
    VALUES (NEW.id, NEW.workspace_id, NEW.owner_id, NEW.updated_at)
    ON CONFLICT (conversation_id) DO UPDATE SET active_at = excluded.active_at
    WHERE conversation_activity.active_at < excluded.active_at;
    RETURN NULL;
END $$;
CREATE TRIGGER conversations_touched AFTER INSERT OR UPDATE OF updated_at ON conversations
    FOR EACH ROW EXECUTE FUNCTION gatehouse_conversation_touched();

ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'transcript_lines'));

-- Nothing writes lines meanwhile: every position drawn so far is
-- committed or gone, and the feed starts after the last.
LOCK TABLE messages, proposals IN SHARE MODE;

INSERT INTO conversation_activity (conversation_id, workspace_id, owner_id, active_at)
SELECT c.id, c.workspace_id, c.owner_id, greatest(c.updated_at, l.created_at)
FROM conversations c
LEFT JOIN LATERAL (SELECT t.created_at FROM transcript_lines t
                   WHERE t.workspace_id = c.workspace_id AND t.conversation_id = c.id
                   ORDER BY t.id DESC LIMIT 1) l ON true;

INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'transcript_lines', s.last, s.last
FROM (SELECT coalesce(pg_sequence_last_value('messages_id_seq'), 0) AS last) s;
