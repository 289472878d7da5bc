-- The audit log's export (issue 28, item 4; internal/telemetry): a
-- roll-up feed over audit_events that hands each row once to the
-- OpenTelemetry log exporter and the JSON lines writer. It starts at the
-- log's head: rows written before the export was first available are not
-- exported.
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls', 'notifications', 'audit_export'));
INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'audit_export', h.last, h.last FROM (SELECT coalesce(max(id), 0) AS last FROM audit_events) h;
