-- The sequencer chains each receipt once, soon after it is written, by an
-- UPDATE that sets its seq and hashes. Two changes make that update and
-- the insert before it cheaper:
-- * Pages are filled to half on insert (fillfactor 50), so the chained
--   version usually fits on the same page: PostgreSQL then logs only the
--   changed tail of the row, not the whole row with its content again
--   (about 1.5 KiB of WAL per call).
-- * The (workspace_id, seq) uniqueness is a partial index over chained
--   receipts: an unchained receipt (seq NULL) no longer gets an entry
--   that the chaining replaces at once. Uniqueness is the same: NULLs
--   never conflicted.
ALTER TABLE receipts SET (fillfactor = 50);
CREATE UNIQUE INDEX receipts_workspace_seq_idx ON receipts (workspace_id, seq) WHERE seq IS NOT NULL;
ALTER TABLE receipts DROP CONSTRAINT receipts_workspace_id_seq_key;
