DROP INDEX IF EXISTS records_key_prefix_idx;
