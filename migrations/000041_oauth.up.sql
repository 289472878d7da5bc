-- MCP authorization (issue 26): Gatehouse is the OAuth 2.1 authorization
-- server of its own /mcp. A client registers itself (RFC 7591, public
-- clients only), a signed-in person consents, and the consent becomes one
-- agent token in api_tokens: listed and revoked on /tokens like any other.
-- Its bearer secret is the access token; a refresh rotates the row's
-- token_hash. Every secret here is stored as its SHA-256 only.

-- A registered client. Registration is unauthenticated, so every field is
-- bounded; nothing in it is verified (the consent page says so).
CREATE TABLE oauth_clients (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    client_name   text NOT NULL CHECK (length(client_name) <= 100),
    redirect_uris text[] NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 5),
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX oauth_clients_created_idx ON oauth_clients (created_at);

-- An OAuth grant is an agent token with these set: the client it was
-- granted to, the resource it is accepted at (RFC 8707 audience), when its
-- current secret (the access token) expires, and the conversation or
-- notebook its MCP sessions are proposed in (neither: a new conversation
-- per session). expires_at is the grant's end: the latest refresh token's
-- expiry.
ALTER TABLE api_tokens
    ADD COLUMN oauth_client_id   uuid REFERENCES oauth_clients (id),
    ADD COLUMN audience          text CHECK (length(audience) <= 2000),
    ADD COLUMN secret_expires_at timestamptz,
    ADD COLUMN conversation_id   uuid REFERENCES conversations (id) ON DELETE SET NULL,
    ADD COLUMN notebook_id       uuid REFERENCES notebooks (id) ON DELETE SET NULL,
    ADD CONSTRAINT api_tokens_one_binding CHECK (conversation_id IS NULL OR notebook_id IS NULL),
    ADD CONSTRAINT api_tokens_oauth_grant CHECK (
        (oauth_client_id IS NULL AND audience IS NULL AND secret_expires_at IS NULL
            AND conversation_id IS NULL AND notebook_id IS NULL)
        OR (oauth_client_id IS NOT NULL AND audience IS NOT NULL AND secret_expires_at IS NOT NULL
            AND expires_at IS NOT NULL AND kind = 'agent'));

CREATE INDEX api_tokens_oauth_client_idx ON api_tokens (oauth_client_id) WHERE oauth_client_id IS NOT NULL;

-- An authorization code: single use, short-lived, bound to the client,
-- the redirect URI, the PKCE S256 challenge, the resource, the user and
-- the choices made at consent. token_id is the grant its exchange issued
-- (a replayed code revokes it).
CREATE TABLE oauth_codes (
    code_hash       sha256_digest PRIMARY KEY,
    client_id       uuid NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    workspace_id    uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri    text NOT NULL CHECK (length(redirect_uri) <= 2000),
    code_challenge  text NOT NULL CHECK (code_challenge ~ '^[A-Za-z0-9_-]{43}$'),
    resource        text NOT NULL CHECK (length(resource) <= 2000),
    read_only       boolean NOT NULL,
    conversation_id uuid REFERENCES conversations (id) ON DELETE CASCADE,
    notebook_id     uuid REFERENCES notebooks (id) ON DELETE CASCADE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz,
    token_id        uuid REFERENCES api_tokens (id) ON DELETE CASCADE,
    CHECK (expires_at <= created_at + interval '10 minutes'),
    CHECK (conversation_id IS NULL OR notebook_id IS NULL),
    CHECK ((used_at IS NULL) = (token_id IS NULL))
);

CREATE INDEX oauth_codes_expires_idx ON oauth_codes (expires_at);
CREATE INDEX oauth_codes_token_idx ON oauth_codes (token_id) WHERE token_id IS NOT NULL;

-- A refresh token of a grant. Each refresh marks the one used (rotated_at)
-- and issues the next; a rotated one presented again revokes the grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash sha256_digest PRIMARY KEY,
    token_id   uuid NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    rotated_at timestamptz,
    CHECK (expires_at > created_at)
);

CREATE INDEX oauth_refresh_tokens_token_idx ON oauth_refresh_tokens (token_id);
