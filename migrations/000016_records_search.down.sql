DROP INDEX IF EXISTS records_value_trgm_idx;
DROP INDEX IF EXISTS records_key_trgm_idx;
DROP EXTENSION IF EXISTS pg_trgm;
