DELETE FROM rollup_feeds WHERE feed = 'transcript_lines';
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts'));
DROP TRIGGER conversations_touched ON conversations;
DROP FUNCTION gatehouse_conversation_touched();
DROP INDEX proposals_line_brin;
DROP TABLE conversation_activity;
