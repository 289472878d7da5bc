-- New rows of the tables every call writes get time-ordered ids
-- (UUIDv7, RFC 9562): the primary key's index grows at its right edge
-- instead of touching a random page per insert, which kept the cache cold
-- and wrote a full-page image to the WAL for most inserts after each
-- checkpoint. Existing ids stay as they are; both kinds are uuids.
-- (PostgreSQL 18 has uuidv7(); this is the same layout for 15–17.)
CREATE FUNCTION gatehouse_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

ALTER TABLE proposals ALTER COLUMN id SET DEFAULT gatehouse_uuid_v7();
ALTER TABLE approvals ALTER COLUMN id SET DEFAULT gatehouse_uuid_v7();
ALTER TABLE receipts ALTER COLUMN id SET DEFAULT gatehouse_uuid_v7();
