-- records.search found a query's candidates through two trigram GIN
-- indexes, one over a record's key and one over its value's text, so
-- every records.put added an entry to both: two GIN pending-list WAL
-- records per put (pg_walinspect over the bench's records.put: one each,
-- 529 bytes together), and pg_trgm's work twice. One index over the key
-- and the value's text joined by U+001F now serves the search: one
-- pending-list entry per put, the same trigrams.
--
-- What stays true: a search finds exactly what it found. The index finds
-- the records whose joined text contains the query; the query then
-- checks that the key or the value contains it (a query that contains
-- U+001F could otherwise span the end of a key and the start of a value:
-- a value's text never holds a raw U+001F, which JSON escapes, but a key
-- may).
CREATE INDEX records_text_trgm_idx ON records USING gin ((key || E'\x1f' || (value::text)) gin_trgm_ops);
DROP INDEX records_key_trgm_idx;
DROP INDEX records_value_trgm_idx;
