DELETE FROM rollup_feeds WHERE feed IN ('conversation_messages', 'conversation_calls');
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'transcript_lines'));
CREATE INDEX proposals_line_brin ON proposals USING brin (line_id) WITH (pages_per_range = 8, autosummarize = on);

LOCK TABLE messages, proposals IN SHARE MODE;

INSERT INTO conversation_activity AS a (conversation_id, workspace_id, owner_id, active_at)
SELECT c.id, c.workspace_id, c.owner_id, greatest(c.updated_at, l.created_at)
FROM conversations c
LEFT JOIN LATERAL (SELECT t.created_at FROM transcript_lines t
                   WHERE t.workspace_id = c.workspace_id AND t.conversation_id = c.id
                   ORDER BY t.id DESC LIMIT 1) l ON true
ON CONFLICT (conversation_id) DO UPDATE SET active_at = excluded.active_at WHERE a.active_at < excluded.active_at;

INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'transcript_lines', s.last, s.last
FROM (SELECT coalesce(pg_sequence_last_value('messages_id_seq'), 0) AS last) s;
