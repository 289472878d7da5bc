DELETE FROM rollup_feeds WHERE feed = 'notifications';
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls'));
DROP TABLE action_links;
DROP TABLE notifications;
DROP TABLE notification_preferences;
