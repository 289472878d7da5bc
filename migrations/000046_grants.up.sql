-- Grants (issue 27, item 4; docs/policy.md, "Grants"): a person who
-- approves a call may also allow similar calls for a while: the calls of
-- one tool or one action class, in one conversation or notebook or from
-- one token, within argument bounds, for 15 minutes to 24 hours and 1 to
-- 100 calls. The decision reads a scope's live grants in the statement
-- that already reads its row (queries/proposals.sql), and a use takes one
-- call off the grant in the call's own transaction (UseGrant: a
-- conditional UPDATE, so concurrent calls on any instance never use more
-- than it holds).
CREATE TABLE grants (
    workspace_id    uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    id              uuid        NOT NULL DEFAULT gatehouse_uuid_v7(),
    -- Whose calls it covers: the scope's owner (the token's owner).
    owner_id        uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    granted_by      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Where: exactly one of a conversation, a notebook or a token.
    conversation_id uuid        REFERENCES conversations (id) ON DELETE CASCADE,
    notebook_id     uuid        REFERENCES notebooks (id) ON DELETE CASCADE,
    token_id        uuid        REFERENCES api_tokens (id) ON DELETE CASCADE,
    -- What: exactly one of a tool and an action class.
    tool            text        CHECK (length(tool) BETWEEN 1 AND 200),
    action_class    text        CHECK (length(action_class) BETWEEN 1 AND 200),
    -- The strictest state it lets through instead of a person: the owner's
    -- card (review_required), or an approver's packet for approver_role
    -- (deferred). An owner grants only for themselves; an approver never
    -- for their own calls.
    ceiling         decision_state NOT NULL CHECK (ceiling IN ('review_required', 'deferred')),
    approver_role   text        CHECK (length(approver_role) BETWEEN 1 AND 100),
    -- Argument bounds, in the constraint vocabulary (policy.GrantBoundKinds).
    bounds          jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(bounds) = 'array'),
    max_calls       integer     NOT NULL CHECK (max_calls BETWEEN 1 AND 100),
    remaining       integer     NOT NULL CHECK (remaining >= 0 AND remaining <= max_calls),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    revoked_by      uuid        REFERENCES users (id) ON DELETE SET NULL,
    last_used_at    timestamptz,
    -- The call whose approval it came with, and its packet (none over REST).
    proposal_id     uuid,
    approval_id     uuid,
    PRIMARY KEY (workspace_id, id),
    CHECK (num_nonnulls(conversation_id, notebook_id, token_id) = 1),
    CHECK (num_nonnulls(tool, action_class) = 1),
    CHECK (expires_at >= created_at + interval '15 minutes' AND expires_at <= created_at + interval '24 hours'),
    CHECK ((ceiling = 'review_required' AND granted_by = owner_id AND approver_role IS NULL)
        OR (ceiling = 'deferred' AND granted_by <> owner_id AND approver_role IS NOT NULL)),
    CHECK (revoked_by IS NULL OR revoked_at IS NOT NULL)
);

-- The decision's read: an owner's live grants (a handful at most).
CREATE INDEX grants_live_idx ON grants (workspace_id, owner_id, expires_at) WHERE revoked_at IS NULL AND remaining > 0;
-- The grants page: a person's grants, those they gave and those over
-- their scopes, newest first.
CREATE INDEX grants_owner_idx ON grants (workspace_id, owner_id, created_at DESC);
CREATE INDEX grants_granted_by_idx ON grants (workspace_id, granted_by, created_at DESC);
CREATE INDEX grants_recent_idx ON grants (workspace_id, created_at DESC);
