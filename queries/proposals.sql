-- name: InsertProposal :one
INSERT INTO proposals (workspace_id, owner_id, conversation_id, notebook_id, proposed_by_user_id, proposed_by_token_id,
                       proposed_by_kind, tool, effect, arguments, rationale, permission_mode, trust_level, disposition,
                       authority, risk, action_class, state, decision, constraints, status,
                       apply_path, resolved_by_user_id, claimed_at, effect_decision, decision_input, caller_declaration)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
        sqlc.narg(apply_path), sqlc.narg(resolved_by_user_id),
        CASE WHEN $21::proposal_status = 'applying' THEN now() END, sqlc.narg(effect_decision), sqlc.narg(decision_input),
        sqlc.narg(caller_declaration))
RETURNING *;

-- name: GetProposal :one
-- Owner-scoped: a proposal in another user's conversation or notebook is not found.
SELECT * FROM proposals WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: GetProposalForUpdate :one
-- The owner's path to effect: the row is locked while the call is decided
-- again and claimed, so one applier decides at a time.
SELECT * FROM proposals WHERE id = $1 AND workspace_id = $2 AND owner_id = $3 FOR UPDATE;

-- name: GetProposalInWorkspaceForUpdate :one
SELECT * FROM proposals WHERE id = $1 AND workspace_id = $2 FOR UPDATE;

-- name: ListProposalsForNotebook :many
-- A notebook's cells, in the order they were added.
SELECT * FROM proposals WHERE workspace_id = $1 AND notebook_id = $2 ORDER BY created_at, id;

-- name: ClaimProposal :one
-- pending (or pending_approval, for an approver) → applying: of concurrent
-- callers exactly one gets the row back.
UPDATE proposals SET status = 'applying', applied_arguments = $2, resolved_by_user_id = $3, apply_path = $4, claimed_at = now(),
       effect_decision = sqlc.arg(effect_decision)
WHERE id = $1 AND workspace_id = sqlc.arg(workspace_id) AND status = sqlc.arg(from_status)::text
RETURNING *;

-- name: EscalateProposal :one
-- The owner's confirm of a call that now needs an approver: it waits for
-- an approval packet, with the arguments that will run.
UPDATE proposals SET status = 'pending_approval', applied_arguments = $2, effect_decision = $3
WHERE id = $1 AND workspace_id = $4 AND status = 'pending'
RETURNING *;

-- name: RecordEffectDecision :exec
-- A call refused at the moment of effect keeps the decision that refused it.
UPDATE proposals SET effect_decision = $2 WHERE id = $1 AND workspace_id = $3;

-- name: FinishProposal :one
UPDATE proposals SET status = $2, result = $3, error = $4, dry_run = $5, resolved_at = now()
WHERE id = $1 AND workspace_id = $6 AND status = 'applying'
RETURNING *;

-- name: RejectProposal :one
UPDATE proposals SET status = 'rejected', rejection_reason = $2, resolved_by_user_id = $3, resolved_at = now()
WHERE id = $1 AND workspace_id = sqlc.arg(workspace_id) AND status = sqlc.arg(from_status)::text
RETURNING *;

-- name: GetProposalInWorkspace :one
-- For approvers, who see every proposal of their workspace's queue.
SELECT * FROM proposals WHERE id = $1 AND workspace_id = $2;

-- name: AddProposalConstraints :exec
-- An approver's constraints join the proposal's, checked when it runs.
UPDATE proposals SET constraints = constraints || sqlc.arg(constraints)::jsonb WHERE id = $1 AND workspace_id = $2;

-- name: CountRecentCalls :one
-- Calls of a tool in the workspace that ran (or are running) since a time:
-- what a rate_limit constraint counts.
SELECT count(*) FROM proposals
WHERE workspace_id = $1 AND tool = $2 AND created_at > $3 AND status IN ('applying', 'applied');

-- name: ListStuckProposals :many
-- Claims that never finished: applying since before the cut-off.
SELECT * FROM proposals
WHERE workspace_id = $1 AND status = 'applying' AND claimed_at < $2
ORDER BY claimed_at LIMIT 100;

-- name: SettleStuckProposal :one
-- A person who checked the tool's effect settles a stuck claim.
UPDATE proposals SET status = sqlc.arg(status), error = sqlc.narg(error), resolved_at = now()
WHERE id = $1 AND workspace_id = $2 AND status = 'applying' AND claimed_at < sqlc.arg(cutoff)
RETURNING *;

-- name: ListRecentDecided :many
-- The scope's last calls with the inputs they were decided on, newest
-- first, for the shadow preview (the caller checked the scope is theirs).
SELECT id, tool, status, action_class, (applied_arguments IS NOT NULL)::boolean AS edited, decision_input, created_at
FROM proposals
WHERE workspace_id = sqlc.arg(workspace_id) AND (conversation_id = sqlc.narg(conversation_id) OR notebook_id = sqlc.narg(notebook_id)) AND decision_input IS NOT NULL
ORDER BY created_at DESC
LIMIT 100;

-- name: ListRecentDecidedInWorkspace :many
-- The workspace's last calls, for an admin's preview of a workspace setting.
SELECT id, tool, status, action_class, (applied_arguments IS NOT NULL)::boolean AS edited, decision_input, created_at
FROM proposals
WHERE workspace_id = $1 AND decision_input IS NOT NULL
ORDER BY created_at DESC
LIMIT 100;

-- name: ReadConversationForDecision :one
-- Everything the decision reads about a call in a conversation, in one
-- round trip: the conversation's mode (owner-scoped: another user's is not
-- found), the workspace's settings, the classes with an open violation
-- and the live grants that may apply here (migration 46: the
-- conversation's and those of the calling token; NULL when there are
-- none, as in almost every scope). Only grants is read for them, through
-- grants_live_idx: every relation a statement names costs each call its
-- executor start-up, so the grantor's email and whether they still hold
-- the grant's role are read when a grant is used (UseGrant).
SELECT c.permission_mode, c.environment, w.internal_domains, w.webhook_allowlist, w.auto_approve_high_risk, w.confirm_runs_high_risk, w.rationale_min_length, w.rationale_mode, w.rationale_warn_until,
       ARRAY(SELECT DISTINCT v.action_class FROM trust_violations v WHERE v.workspace_id = w.id AND v.cleared_at IS NULL)::text[] AS open_violations,
       (SELECT jsonb_agg(jsonb_build_object('id', g.id, 'granted_by', g.granted_by, 'tool', g.tool, 'action_class', g.action_class,
                                            'ceiling', g.ceiling, 'role', g.approver_role, 'bounds', g.bounds, 'remaining', g.remaining,
                                            'max_calls', g.max_calls, 'expires_at', g.expires_at) ORDER BY g.expires_at, g.id)
        FROM grants g
        WHERE g.workspace_id = c.workspace_id AND g.owner_id = c.owner_id AND g.revoked_at IS NULL AND g.remaining > 0 AND g.expires_at > now()
          AND (g.conversation_id = c.id OR g.token_id = sqlc.narg(token_id))
       )::jsonb AS grants
FROM conversations c JOIN workspaces w ON w.id = c.workspace_id
WHERE c.id = sqlc.arg(id) AND c.workspace_id = sqlc.arg(workspace_id) AND c.owner_id = sqlc.arg(owner_id);

-- name: ReadNotebookForDecision :one
-- The same for a cell in a notebook: its trust level.
SELECT n.trust_level, n.environment, w.internal_domains, w.webhook_allowlist, w.auto_approve_high_risk, w.confirm_runs_high_risk, w.rationale_min_length, w.rationale_mode, w.rationale_warn_until,
       ARRAY(SELECT DISTINCT v.action_class FROM trust_violations v WHERE v.workspace_id = w.id AND v.cleared_at IS NULL)::text[] AS open_violations,
       (SELECT jsonb_agg(jsonb_build_object('id', g.id, 'granted_by', g.granted_by, 'tool', g.tool, 'action_class', g.action_class,
                                            'ceiling', g.ceiling, 'role', g.approver_role, 'bounds', g.bounds, 'remaining', g.remaining,
                                            'max_calls', g.max_calls, 'expires_at', g.expires_at) ORDER BY g.expires_at, g.id)
        FROM grants g
        WHERE g.workspace_id = n.workspace_id AND g.owner_id = n.owner_id AND g.revoked_at IS NULL AND g.remaining > 0 AND g.expires_at > now()
          AND (g.notebook_id = n.id OR g.token_id = sqlc.narg(token_id))
       )::jsonb AS grants
FROM notebooks n JOIN workspaces w ON w.id = n.workspace_id
WHERE n.id = sqlc.arg(id) AND n.workspace_id = sqlc.arg(workspace_id) AND n.owner_id = sqlc.arg(owner_id);

-- name: RecordAutoCall :one
-- The automatic path's whole record in one statement, after the tool ran
-- in the same transaction: the proposal in its final state (its own
-- transcript line, in a conversation: migration 34), its audit row and
-- its receipt. One round trip instead of five, and no row any other call
-- writes. One audit row, not two: a call that runs at once is created and
-- finished in the same instant, so its row is the finished one
-- (proposal.applied or proposal.failed) carrying what the created row
-- said (scope, state, class, rationale...: data has "scope", which only a
-- call's created row has); the roll-ups read it as the call's created row
-- too.
WITH p AS (
    INSERT INTO proposals (id, workspace_id, owner_id, conversation_id, notebook_id, proposed_by_user_id, proposed_by_token_id,
                           proposed_by_kind, tool, effect, arguments, rationale, permission_mode, trust_level, disposition,
                           authority, risk, action_class, state, decision, constraints, status, result, error, dry_run,
                           apply_path, resolved_by_user_id, claimed_at, resolved_at, effect_decision, decision_input)
    VALUES (sqlc.arg(id), sqlc.arg(workspace_id), sqlc.arg(owner_id), sqlc.narg(conversation_id), sqlc.narg(notebook_id),
            sqlc.arg(owner_id), sqlc.narg(proposed_by_token_id), sqlc.arg(proposed_by_kind), sqlc.arg(tool), sqlc.arg(effect),
            sqlc.arg(arguments), sqlc.arg(rationale), sqlc.narg(permission_mode), sqlc.narg(trust_level), sqlc.arg(disposition),
            sqlc.narg(authority), sqlc.narg(risk), sqlc.narg(action_class), sqlc.narg(state), sqlc.arg(decision), sqlc.arg(constraints),
            sqlc.arg(status), sqlc.narg(result), sqlc.narg(error), sqlc.arg(dry_run), 'auto', sqlc.arg(owner_id), now(), now(),
            sqlc.arg(decision), sqlc.arg(decision_input))
    RETURNING *
), audit AS (
    INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id, data, retention_until)
    SELECT p.workspace_id, sqlc.arg(actor_kind), p.owner_id, p.proposed_by_token_id, sqlc.arg(finished_action)::text, 'proposal', p.id::text,
           sqlc.arg(created_data)::jsonb || sqlc.arg(finished_data)::jsonb, sqlc.arg(retention_until)
    FROM p
), receipt AS (
    INSERT INTO receipts (id, workspace_id, kind, proposal_id, action_class, content, content_hash, metadata)
    SELECT sqlc.arg(receipt_id), p.workspace_id, 'execution', p.id, p.action_class, sqlc.arg(receipt_content), sqlc.arg(receipt_hash), sqlc.arg(receipt_metadata)
    FROM p
)
-- Only the time: the caller has everything else in memory.
SELECT created_at FROM p;

-- name: RecordAutoCalls :one
-- Automatic calls committed together (group commit, see
-- internal/proposals/group.go): for every call, exactly what
-- RecordAutoCall writes (one audit row per call), in one statement. The calls come as one JSON
-- array of objects keyed like RecordAutoCall's parameters (c.r below), in
-- the order they ran ("ord"); their rows are written in that order. The
-- statement says how many proposals it wrote.
WITH c AS (
    SELECT e AS r, (e->>'ord')::int AS ord, (e->>'id')::uuid AS id FROM jsonb_array_elements(sqlc.arg(calls)::jsonb) AS e
), p AS (
    INSERT INTO proposals (id, workspace_id, owner_id, conversation_id, notebook_id, proposed_by_user_id, proposed_by_token_id,
                           proposed_by_kind, tool, effect, arguments, rationale, permission_mode, trust_level, disposition,
                           authority, risk, action_class, state, decision, constraints, status, result, error, dry_run,
                           apply_path, resolved_by_user_id, claimed_at, resolved_at, effect_decision, decision_input)
    SELECT c.id, (c.r->>'workspace_id')::uuid, (c.r->>'owner_id')::uuid, (c.r->>'conversation_id')::uuid, (c.r->>'notebook_id')::uuid,
           (c.r->>'owner_id')::uuid, (c.r->>'proposed_by_token_id')::uuid, c.r->>'proposed_by_kind', c.r->>'tool', c.r->>'effect',
           c.r->'arguments', c.r->>'rationale', c.r->>'permission_mode', c.r->>'trust_level', c.r->>'disposition',
           c.r->>'authority', c.r->>'risk', c.r->>'action_class', c.r->>'state', nullif(c.r->'decision', 'null'), c.r->'constraints',
           c.r->>'status', nullif(c.r->'result', 'null'), c.r->>'error', (c.r->>'dry_run')::boolean,
           'auto', (c.r->>'owner_id')::uuid, now(), now(), nullif(c.r->'decision', 'null'), nullif(c.r->'decision_input', 'null')
    FROM c ORDER BY c.ord
    RETURNING id, created_at
), audit AS (
    INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id, data, retention_until)
    SELECT (c.r->>'workspace_id')::uuid, c.r->>'actor_kind', (c.r->>'owner_id')::uuid, (c.r->>'proposed_by_token_id')::uuid,
           c.r->>'finished_action', 'proposal', p.id::text, (c.r->'created_data') || (c.r->'finished_data'), (c.r->>'retention_until')::timestamptz
    FROM p JOIN c ON c.id = p.id
    ORDER BY c.ord
), receipt AS (
    INSERT INTO receipts (id, workspace_id, kind, proposal_id, action_class, content, content_hash, metadata)
    SELECT (c.r->>'receipt_id')::uuid, (c.r->>'workspace_id')::uuid, 'execution', p.id, c.r->>'action_class', c.r->'receipt_content',
           decode(c.r->>'receipt_hash', 'base64'), c.r->'receipt_metadata'
    FROM p JOIN c ON c.id = p.id ORDER BY c.ord
)
SELECT count(*)::int AS recorded, min(created_at)::timestamptz AS created_at FROM p;

-- name: ListScopeClasses :many
-- The action classes a conversation's or notebook's latest calls (up to
-- max_calls) were decided as: a range of the scope's index from its
-- newest call, whatever the scope's history (a DISTINCT over every call
-- took 50 ms at 200,000 calls).
SELECT DISTINCT c.action_class::text FROM (
    (SELECT p.action_class FROM proposals p
     WHERE p.workspace_id = sqlc.arg(workspace_id) AND p.conversation_id = sqlc.narg(conversation_id)
     ORDER BY p.line_id DESC LIMIT sqlc.arg(max_calls))
    UNION ALL
    (SELECT p.action_class FROM proposals p
     WHERE p.workspace_id = sqlc.arg(workspace_id) AND p.notebook_id = sqlc.narg(notebook_id)
     ORDER BY p.created_at DESC LIMIT sqlc.arg(max_calls))
) c
WHERE c.action_class IS NOT NULL
ORDER BY 1;

-- name: ListConversationCards :many
-- The proposals among ids that are the conversation's (the tool lines of
-- a transcript page, the cards a live page shows), with the names their
-- cards show: who proposed them (the person, the token) and who decided
-- them ('' for a name that is gone). One query for a page, by primary
-- key; the caller bounds ids, and an id of another conversation or
-- workspace is simply not found.
SELECT sqlc.embed(p),
       coalesce(pu.email, '')::text AS proposer_email, coalesce(ru.email, '')::text AS decider_email,
       coalesce(t.name, '')::text AS token_name, coalesce(t.kind, '')::text AS token_kind
FROM proposals p
LEFT JOIN users pu ON pu.id = p.proposed_by_user_id
LEFT JOIN users ru ON ru.id = p.resolved_by_user_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
WHERE p.id = ANY(@ids::uuid[]) AND p.workspace_id = @workspace_id AND p.conversation_id = @conversation_id
LIMIT @max_cards;

-- name: ListOpenInConversation :many
-- The conversation's calls that still wait (for a person, or to finish
-- applying), latest first, for a model turn's context: a range of
-- proposals_conversation_open_idx (migration 27) with a LIMIT.
SELECT * FROM proposals
WHERE workspace_id = @workspace_id AND conversation_id = @conversation_id
  AND status IN ('pending', 'pending_approval', 'applying')
ORDER BY created_at DESC
LIMIT @max_calls;
