-- Conversations' activity is folded from two feeds the database already
-- indexes, and the BRIN index on proposals.line_id is gone.
--
-- Why: migration 38 found the calls after a line position through a BRIN
-- index on proposals.line_id, which writes nothing for a new call. But a
-- BRIN index only narrows the ranges it has summarized, and new ranges
-- are summarized by VACUUM, which autovacuum runs on an insert-only table
-- after a fifth of its size in new rows: every fold (several a second)
-- and every conversations list read every call since, 13,000 rows for a
-- tail of 271 at 300,000 calls, and up to 200,000 at a million. A b-tree
-- on line_id would be exact but add an index entry, a WAL record, to
-- every call.
--
-- How: every call already writes its proposal.created audit row, which
-- names its scope (data.scope, data.scope_id), in the audit log's id order
-- (the feed the intent roll-up folds; each partition's primary key is its
-- id). So a conversation's calls are folded from audit_events ids
-- ('conversation_calls') and its messages from messages ids
-- ('conversation_messages', messages' primary key), each feed with its own
-- watermark, and the list reads what follows each watermark through the
-- same keys.
DROP INDEX proposals_line_brin;
DELETE FROM rollup_feeds WHERE feed = 'transcript_lines';
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls'));

-- Nothing writes lines or calls meanwhile: the activity is computed anew
-- and each feed starts after the last row written.
LOCK TABLE messages, proposals, audit_events IN SHARE MODE;

INSERT INTO conversation_activity AS a (conversation_id, workspace_id, owner_id, active_at)
SELECT c.id, c.workspace_id, c.owner_id, greatest(c.updated_at, l.created_at)
FROM conversations c
LEFT JOIN LATERAL (SELECT t.created_at FROM transcript_lines t
                   WHERE t.workspace_id = c.workspace_id AND t.conversation_id = c.id
                   ORDER BY t.id DESC LIMIT 1) l ON true
ON CONFLICT (conversation_id) DO UPDATE SET active_at = excluded.active_at WHERE a.active_at < excluded.active_at;

INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'conversation_messages', h.last, h.last FROM (SELECT coalesce(max(id), 0) AS last FROM messages) h
UNION ALL
SELECT 'conversation_calls', h.last, h.last FROM (SELECT coalesce(max(id), 0) AS last FROM audit_events) h;
