CREATE INDEX proposals_rationale_fts_idx ON proposals USING gin (to_tsvector('simple', rationale));
