-- Conversations with a durable permission mode, their transcript, the
-- records store the built-in tools act on, and tool-call proposals.

CREATE TABLE conversations (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id    uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    owner_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title           text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    permission_mode text NOT NULL DEFAULT 'approve' CHECK (permission_mode IN ('approve', 'auto')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX conversations_owner_idx ON conversations (workspace_id, owner_id, updated_at DESC);

CREATE TABLE proposals (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id         uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    conversation_id      uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    proposed_by_user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    proposed_by_token_id uuid REFERENCES api_tokens (id) ON DELETE SET NULL,
    proposed_by_kind     text NOT NULL CHECK (proposed_by_kind IN ('user', 'agent')),
    tool                 text NOT NULL,
    effect               text NOT NULL CHECK (effect IN ('read', 'mutate', 'destructive')),
    arguments            jsonb NOT NULL,
    rationale            text NOT NULL CHECK (length(rationale) BETWEEN 10 AND 500),
    permission_mode      text NOT NULL CHECK (permission_mode IN ('approve', 'auto')),
    disposition          text NOT NULL CHECK (disposition IN ('auto-run', 'auto-apply', 'propose')),
    status               text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applying', 'applied', 'rejected', 'failed')),
    applied_arguments    jsonb,
    result               jsonb,
    error                text,
    rejection_reason     text,
    resolved_by_user_id  uuid REFERENCES users (id) ON DELETE SET NULL,
    apply_path           text CHECK (apply_path IN ('auto', 'human')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    resolved_at          timestamptz
);

CREATE INDEX proposals_conversation_idx ON proposals (conversation_id, created_at);

CREATE TABLE messages (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role            text NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content         text NOT NULL CHECK (length(content) <= 20000),
    proposal_id     uuid REFERENCES proposals (id) ON DELETE CASCADE,
    author_user_id  uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((role = 'tool') = (proposal_id IS NOT NULL))
);

CREATE INDEX messages_conversation_idx ON messages (conversation_id, id);

-- The per-workspace records store that the built-in tools act on.
CREATE TABLE records (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    collection   text NOT NULL CHECK (collection ~ '^[A-Za-z0-9_.-]{1,100}$'),
    key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
    value        jsonb NOT NULL CHECK (jsonb_typeof(value) = 'object'),
    notes        jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(notes) = 'array'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, collection, key)
);
