-- A receipt written on the automatic path leaves its content hash to the
-- sequencer, which computes it (sha256 of the content's RFC 8785 form) in
-- its batch, off the call path. Every chained receipt has one; a receipt
-- without one is never redacted before it is chained.
ALTER TABLE receipts
    ALTER COLUMN content_hash DROP NOT NULL,
    DROP CONSTRAINT receipts_content_hash_check,
    ADD CONSTRAINT receipts_content_hash_check CHECK (content_hash IS NULL OR length(content_hash) = 32),
    ADD CONSTRAINT receipts_hashed_when_chained CHECK (seq IS NULL OR content_hash IS NOT NULL),
    ADD CONSTRAINT receipts_hashed_when_redacted CHECK (content IS NOT NULL OR content_hash IS NOT NULL);
