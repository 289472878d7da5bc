-- Notebooks: the second scope, with a durable trust level. A notebook's
-- cells are proposals, so one propose → apply service serves both scopes.

CREATE TABLE notebooks (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    owner_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title        text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    trust_level  text NOT NULL DEFAULT 'cautious' CHECK (trust_level IN ('cautious', 'trusted', 'autonomous')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX notebooks_owner_idx ON notebooks (workspace_id, owner_id, updated_at DESC);

-- A proposal belongs to exactly one scope. owner_id is the scope's owner
-- (owners never change), so ownership checks need no join per scope.
ALTER TABLE proposals
    ADD COLUMN notebook_id uuid REFERENCES notebooks (id) ON DELETE CASCADE,
    ADD COLUMN owner_id uuid REFERENCES users (id) ON DELETE CASCADE,
    ADD COLUMN trust_level text CHECK (trust_level IN ('cautious', 'trusted', 'autonomous')),
    ALTER COLUMN conversation_id DROP NOT NULL,
    ALTER COLUMN permission_mode DROP NOT NULL;

UPDATE proposals p SET owner_id = c.owner_id FROM conversations c WHERE c.id = p.conversation_id;

ALTER TABLE proposals
    ALTER COLUMN owner_id SET NOT NULL,
    DROP CONSTRAINT proposals_disposition_check,
    ADD CONSTRAINT proposals_disposition_check CHECK (disposition IN ('auto-run', 'auto-apply', 'propose', 'auto', 'confirm', 'gated')),
    ADD CONSTRAINT proposals_one_scope CHECK (
        (conversation_id IS NOT NULL AND permission_mode IS NOT NULL AND notebook_id IS NULL AND trust_level IS NULL
            AND disposition IN ('auto-run', 'auto-apply', 'propose'))
        OR
        (notebook_id IS NOT NULL AND trust_level IS NOT NULL AND conversation_id IS NULL AND permission_mode IS NULL
            AND disposition IN ('auto', 'confirm', 'gated')));

CREATE INDEX proposals_notebook_idx ON proposals (notebook_id, created_at) WHERE notebook_id IS NOT NULL;
CREATE INDEX proposals_owner_idx ON proposals (owner_id);
