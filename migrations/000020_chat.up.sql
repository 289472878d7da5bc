-- Chat with a model: a conversation's model turns, durable in PostgreSQL
-- so any instance can resume one (a card approved after a restart, or on
-- another instance), and exactly one does (the lease).

-- A conversation's model and token budget, set by its owner (a row of its
-- own, so the conversations table and its queries stay as they are).
CREATE TABLE chat_settings (
    conversation_id uuid PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    model           text CHECK (length(model) BETWEEN 1 AND 200),
    token_budget    bigint CHECK (token_budget > 0),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE chat_turns (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id      uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    conversation_id   uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The agent token the model's calls act with (an agent of the owner,
    -- never the owner); a revoked token stops the turn.
    agent_token_id    uuid REFERENCES api_tokens (id) ON DELETE SET NULL,
    model             text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
    state             text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'waiting', 'done', 'failed', 'stopped')),
    -- The model messages so far (system, user, assistant with tool calls,
    -- tool results), in Gatehouse's own JSON shape (see internal/chat).
    messages          jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(messages) = 'array'),
    -- The assistant's text while it streams; cleared when it is recorded.
    streaming         text NOT NULL DEFAULT '',
    model_requests    integer NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    error             text,
    -- The instance running the turn and until when; an expired lease lets
    -- another instance resume the turn from its last durable state.
    lease_owner       text,
    lease_until       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);

-- One turn at a time in a conversation.
CREATE UNIQUE INDEX chat_turns_one_active_idx ON chat_turns (conversation_id) WHERE state IN ('running', 'waiting');
CREATE INDEX chat_turns_conversation_idx ON chat_turns (conversation_id, created_at);
CREATE INDEX chat_turns_active_idx ON chat_turns (lease_until) WHERE state IN ('running', 'waiting');

-- The tool calls a turn's model made and what became of each: the
-- proposal it became, or (outcome) the answer it got at once without one
-- (malformed arguments, an unknown tool, a refusal).
CREATE TABLE chat_tool_calls (
    turn_id      uuid NOT NULL REFERENCES chat_turns (id) ON DELETE CASCADE,
    tool_call_id text NOT NULL CHECK (length(tool_call_id) BETWEEN 1 AND 200),
    seq          integer NOT NULL,
    tool         text NOT NULL,
    proposal_id  uuid REFERENCES proposals (id) ON DELETE SET NULL,
    outcome      jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (turn_id, tool_call_id)
);

CREATE INDEX chat_tool_calls_proposal_idx ON chat_tool_calls (proposal_id) WHERE proposal_id IS NOT NULL;

-- Notices: what happened in a turn that is neither the user's nor the
-- model's words (a model error, a stop, a budget used up).
ALTER TABLE messages
    DROP CONSTRAINT messages_role_check,
    ADD CONSTRAINT messages_role_check CHECK (role IN ('user', 'assistant', 'tool', 'notice'));
