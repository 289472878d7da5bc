-- MCP sessions outlive the instance that opened them (issue 26,
-- scale-out). A session's binding was only in the memory of the process
-- that answered its initialize, so behind a round-robin balancer every
-- request that reached another instance got "session not found". Each
-- session is now a row: any instance that receives a request for a
-- session it does not hold reads the row and takes the session up
-- (internal/mcp/sessions.go), as the client initialized it.
--
-- What a session needs on any instance: the token that opened it (no
-- other token may use its id), the scope its calls are proposed in (a
-- conversation or notebook chosen on connect; or a conversation planned on
-- initialize, with its id drawn then, that the first tool call creates on
-- whichever instance it reaches, once: conversations' primary key settles
-- a race), the client's initialize parameters and the protocol version
-- negotiated. seen_at says when it was last used (written at most once a
-- minute per instance); a session idle past the gateway's session timeout
-- is not taken up again, and the sweeper deletes rows idle for a day.
CREATE TABLE mcp_sessions (
    workspace_id     uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    id               text        NOT NULL CHECK (length(id) BETWEEN 16 AND 64),
    token_id         uuid        NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    owner_id         uuid        NOT NULL,
    conversation_id  uuid,
    notebook_id      uuid,
    -- conversation_id is planned (created by the first tool call), not
    -- chosen on connect.
    planned          boolean     NOT NULL DEFAULT false,
    client_name      text        NOT NULL DEFAULT '' CHECK (length(client_name) <= 200),
    initialize       jsonb       NOT NULL,
    protocol_version text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    seen_at          timestamptz NOT NULL DEFAULT now(),
    closed_at        timestamptz,
    PRIMARY KEY (workspace_id, id),
    CHECK (num_nonnulls(conversation_id, notebook_id) = 1),
    CHECK (NOT planned OR conversation_id IS NOT NULL)
);
-- The sweeper's range.
CREATE INDEX mcp_sessions_seen_idx ON mcp_sessions (seen_at);
