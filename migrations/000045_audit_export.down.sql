DELETE FROM rollup_feeds WHERE feed = 'audit_export';
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls', 'notifications'));
