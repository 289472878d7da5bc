-- records.search finds a substring of a record's key or value
-- (ILIKE '%…%'). Without an index every search read every record of the
-- workspace (a collection of 20,000 records: 200 ms a search); trigram
-- indexes find the candidates. pg_trgm ships with PostgreSQL (contrib)
-- and is a trusted extension: the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX records_key_trgm_idx ON records USING gin (key gin_trgm_ops);
CREATE INDEX records_value_trgm_idx ON records USING gin ((value::text) gin_trgm_ops);
