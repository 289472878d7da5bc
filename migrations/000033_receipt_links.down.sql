CREATE OR REPLACE FUNCTION gatehouse_workspace_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM audit_events WHERE workspace_id = OLD.id;
    DELETE FROM receipts WHERE workspace_id = OLD.id;
    DELETE FROM records WHERE workspace_id = OLD.id;
    RETURN NULL;
END $$;

DROP VIEW receipt_rows;
LOCK TABLE receipts, receipt_links IN SHARE MODE;

ALTER TABLE receipts SET (fillfactor = 50);
ALTER TABLE receipts
    ADD COLUMN seq chain_seq, ADD COLUMN prev_hash sha256_digest, ADD COLUMN hash sha256_digest,
    ADD COLUMN chained_at timestamptz;
UPDATE receipts r SET seq = l.seq, prev_hash = l.prev_hash, hash = l.hash, chained_at = l.chained_at,
       content_hash = coalesce(r.content_hash, l.content_hash)
FROM receipt_links l WHERE l.receipt_id = r.id;
ALTER TABLE receipts
    ADD CONSTRAINT receipts_check CHECK ((seq IS NULL) = (hash IS NULL) AND (seq IS NULL) = (prev_hash IS NULL)),
    ADD CONSTRAINT receipts_hashed_when_chained CHECK (seq IS NULL OR content_hash IS NOT NULL);
CREATE UNIQUE INDEX receipts_workspace_seq_idx ON receipts (workspace_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX receipts_unchained_idx ON receipts (workspace_id, created_at, id) WHERE seq IS NULL;
DROP INDEX receipts_position_idx;
ALTER TABLE receipts DROP COLUMN pos;
DROP TABLE receipt_links;

DELETE FROM rollup_feeds WHERE feed = 'receipts';
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events'));
