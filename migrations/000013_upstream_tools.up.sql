-- Pinned definitions of the tools of MCP upstream servers (declared in the
-- policy file). definition is the latest definition seen (name,
-- description, input schema, annotations, as RFC 8785 canonical JSON) and
-- definition_hash its SHA-256; accepted_* is the definition an admin (or
-- the policy file's accept list, accepted_by NULL) accepted. A tool is
-- callable only while the two hashes agree: any change upstream holds it
-- until an admin reviews the difference and accepts it.
CREATE TABLE upstream_tools (
    upstream            text NOT NULL CHECK (upstream ~ '^[a-z][a-z0-9_-]*$' AND length(upstream) <= 40),
    name                text NOT NULL CHECK (name ~ '^[A-Za-z0-9_.-]{1,100}$'),
    definition_hash     text NOT NULL CHECK (definition_hash ~ '^[0-9a-f]{64}$'),
    definition          jsonb NOT NULL,
    status              text NOT NULL CHECK (status IN ('accepted', 'held')),
    accepted_hash       text CHECK (accepted_hash ~ '^[0-9a-f]{64}$'),
    accepted_definition jsonb,
    accepted_by         uuid REFERENCES users (id) ON DELETE SET NULL,
    accepted_at         timestamptz,
    first_seen_at       timestamptz NOT NULL DEFAULT now(),
    seen_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (upstream, name),
    -- accepted means: the definition seen is the one accepted.
    CONSTRAINT upstream_tools_accepted_is_pinned CHECK (status <> 'accepted' OR accepted_hash = definition_hash),
    CONSTRAINT upstream_tools_accepted_together CHECK ((accepted_hash IS NULL) = (accepted_definition IS NULL) AND (accepted_hash IS NULL) = (accepted_at IS NULL))
);
