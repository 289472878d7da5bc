UPDATE receipts SET content_hash = sha256(convert_to(content::text, 'UTF8')) WHERE content_hash IS NULL;
ALTER TABLE receipts
    DROP CONSTRAINT receipts_hashed_when_redacted,
    DROP CONSTRAINT receipts_hashed_when_chained,
    DROP CONSTRAINT receipts_content_hash_check,
    ADD CONSTRAINT receipts_content_hash_check CHECK (length(content_hash) = 32),
    ALTER COLUMN content_hash SET NOT NULL;
