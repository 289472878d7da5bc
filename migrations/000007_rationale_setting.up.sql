-- Rationale enforcement: a workspace may demand longer rationales than the
-- floor of 10 characters every call must meet.
ALTER TABLE workspaces ADD COLUMN rationale_min_length integer NOT NULL DEFAULT 10 CHECK (rationale_min_length BETWEEN 10 AND 500);
