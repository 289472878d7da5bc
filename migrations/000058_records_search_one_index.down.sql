CREATE INDEX records_key_trgm_idx ON records USING gin (key gin_trgm_ops);
CREATE INDEX records_value_trgm_idx ON records USING gin ((value::text) gin_trgm_ops);
DROP INDEX records_text_trgm_idx;
