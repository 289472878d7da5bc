DELETE FROM rollup_feeds WHERE feed = 'shadow_rules';
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls', 'notifications', 'audit_export'));
DROP TABLE shadow_counts;
DROP TABLE shadow_rules;
