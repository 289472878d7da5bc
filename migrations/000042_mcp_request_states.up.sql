-- MCP's 2026-07-28 revision: a call that waits for a person answers an
-- input-required result whose requestState the client sends back with
-- its retry (internal/mcp/stateless.go). The state is sealed (AEAD) and
-- single use: each one's nonce is recorded here when it is used, and a
-- nonce met again is refused. Rows are kept until the state expires.
CREATE TABLE mcp_request_states (
    workspace_id uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    nonce        bytea       NOT NULL CHECK (length(nonce) = 24),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, nonce)
);
CREATE INDEX mcp_request_states_expires_idx ON mcp_request_states (expires_at);
