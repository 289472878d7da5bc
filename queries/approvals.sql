-- name: InsertApproval :one
-- A packet opens with its escalation and quorum rule (migration 47): the
-- tool's own (the policy file's) where it has one, else the workspace's,
-- read here in the same statement. Quorum is the larger of the tool's and
-- the role's; an escalation due at or after the expiry never happens.
INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, requires_witness, constraints, expires_at,
                       quorum, escalate_at, escalate_to)
SELECT w.id, sqlc.arg(proposal_id), sqlc.arg(summary), sqlc.arg(approver_role), sqlc.arg(requires_witness), sqlc.arg(constraints),
       sqlc.arg(expires_at), e.quorum,
       CASE WHEN e.escalate_at < sqlc.arg(expires_at)::timestamptz THEN e.escalate_at END,
       CASE WHEN e.escalate_at < sqlc.arg(expires_at)::timestamptz THEN e.escalate_to END
FROM workspaces w
CROSS JOIN LATERAL (
    SELECT greatest(sqlc.arg(tool_quorum)::int, coalesce((w.approval_quorums ->> sqlc.arg(approver_role)::text)::int, 1))::smallint AS quorum,
           CASE WHEN sqlc.arg(tool_escalate_minutes)::int > 0 THEN now() + make_interval(mins => sqlc.arg(tool_escalate_minutes)::int)
                WHEN w.escalate_after_minutes > 0 THEN now() + make_interval(mins => w.escalate_after_minutes) END AS escalate_at,
           CASE WHEN sqlc.arg(tool_escalate_minutes)::int > 0 THEN nullif(sqlc.arg(tool_escalate_to)::text, '')
                WHEN w.escalate_after_minutes > 0 THEN w.escalate_to_role END AS escalate_to
) e
WHERE w.id = sqlc.arg(workspace_id)
RETURNING *;

-- name: GetApproval :one
SELECT * FROM approvals WHERE id = $1 AND workspace_id = $2;

-- name: GetApprovalForUpdate :one
-- Resolving a packet locks it: votes, the resolution and the call's claim
-- happen in one transaction, so the packet and its proposal move together.
SELECT * FROM approvals WHERE id = $1 AND workspace_id = $2 FOR UPDATE;

-- name: RequireWitness :exec
-- An approver asked for a second pair of eyes.
UPDATE approvals SET requires_witness = true WHERE id = $1 AND workspace_id = $2;

-- name: GetApprovalForProposal :one
SELECT * FROM approvals WHERE proposal_id = $1 AND workspace_id = $2;

-- The queue is read a page at a time, through indexes that lead with the
-- workspace (migration 29): a page query reads at most @budget packets
-- of its list from the cursor on, in the list's order, and returns the
-- ids of those that match the filters (the roles the caller resolves,
-- tool, action class, risk; empty = any), at most @page_limit rows. The
-- @budget-th packet read is returned too (matched or not, last_read
-- true): a page that stops there before filling says where the next one
-- starts, so a narrow filter costs the same per page as none, however
-- long the history. ListApprovalsByID then reads what the inbox shows of
-- the page's packets.

-- name: ListPendingApprovalsPage :many
-- Pending packets, soonest expiry first, after the cursor's (expires_at, id).
SELECT s.id, s.at, s.matched::boolean AS matched, s.n = sqlc.arg(budget)::bigint AS last_read
FROM (
    SELECT a.id, a.expires_at AS at, a.n,
           (a.resolver_roles && sqlc.arg(roles)::text[]
            AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
            AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class))
            AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) IS TRUE AS matched
    FROM (
        SELECT q.id, q.proposal_id, q.resolver_roles, q.expires_at, row_number() OVER (ORDER BY q.expires_at, q.id) AS n
        FROM approvals q
        WHERE q.workspace_id = sqlc.arg(workspace_id) AND q.status = 'pending'
          AND (q.expires_at, q.id) > (sqlc.arg(after_at)::timestamptz, sqlc.arg(after_id)::uuid)
        ORDER BY q.expires_at, q.id
        LIMIT sqlc.arg(budget)
    ) a
    -- One lookup per packet read, in the packet's order (never a join
    -- that reads every call first), and only when the filter names the
    -- call's tool, class or risk.
    LEFT JOIN LATERAL (
        SELECT c.tool, c.action_class, c.risk FROM proposals c
        WHERE c.id = a.proposal_id AND c.workspace_id = sqlc.arg(workspace_id) AND (sqlc.arg(tool) <> '' OR sqlc.arg(action_class) <> '' OR sqlc.arg(risk) <> '')
        LIMIT 1
    ) p ON true
) s
WHERE s.matched OR s.n = sqlc.arg(budget)
ORDER BY s.at, s.id
LIMIT sqlc.arg(page_limit);

-- name: ListApprovalsPageByStatus :many
-- Approved, rejected or expired packets, newest first, before the
-- cursor's (created_at, id).
SELECT s.id, s.at, s.matched::boolean AS matched, s.n = sqlc.arg(budget)::bigint AS last_read
FROM (
    SELECT a.id, a.created_at AS at, a.n,
           (a.resolver_roles && sqlc.arg(roles)::text[]
            AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
            AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class))
            AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) IS TRUE AS matched
    FROM (
        SELECT q.id, q.proposal_id, q.resolver_roles, q.created_at, row_number() OVER (ORDER BY q.created_at DESC, q.id DESC) AS n
        FROM approvals q
        WHERE q.workspace_id = sqlc.arg(workspace_id) AND q.status = sqlc.arg(status)
          AND (q.created_at, q.id) < (sqlc.arg(before_at)::timestamptz, sqlc.arg(before_id)::uuid)
        ORDER BY q.created_at DESC, q.id DESC
        LIMIT sqlc.arg(budget)
    ) a
    -- One lookup per packet read, in the packet's order (never a join
    -- that reads every call first), and only when the filter names the
    -- call's tool, class or risk.
    LEFT JOIN LATERAL (
        SELECT c.tool, c.action_class, c.risk FROM proposals c
        WHERE c.id = a.proposal_id AND c.workspace_id = sqlc.arg(workspace_id) AND (sqlc.arg(tool) <> '' OR sqlc.arg(action_class) <> '' OR sqlc.arg(risk) <> '')
        LIMIT 1
    ) p ON true
) s
WHERE s.matched OR s.n = sqlc.arg(budget)
ORDER BY s.at DESC, s.id DESC
LIMIT sqlc.arg(page_limit);

-- name: ListApprovalsPageAnyStatus :many
-- Packets of any status, newest first, before the cursor's (created_at, id).
SELECT s.id, s.at, s.matched::boolean AS matched, s.n = sqlc.arg(budget)::bigint AS last_read
FROM (
    SELECT a.id, a.created_at AS at, a.n,
           (a.resolver_roles && sqlc.arg(roles)::text[]
            AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
            AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class))
            AND (sqlc.arg(risk)::text = '' OR p.risk = sqlc.arg(risk))) IS TRUE AS matched
    FROM (
        SELECT q.id, q.proposal_id, q.resolver_roles, q.created_at, row_number() OVER (ORDER BY q.created_at DESC, q.id DESC) AS n
        FROM approvals q
        WHERE q.workspace_id = sqlc.arg(workspace_id)
          AND (q.created_at, q.id) < (sqlc.arg(before_at)::timestamptz, sqlc.arg(before_id)::uuid)
        ORDER BY q.created_at DESC, q.id DESC
        LIMIT sqlc.arg(budget)
    ) a
    -- One lookup per packet read, in the packet's order (never a join
    -- that reads every call first), and only when the filter names the
    -- call's tool, class or risk.
    LEFT JOIN LATERAL (
        SELECT c.tool, c.action_class, c.risk FROM proposals c
        WHERE c.id = a.proposal_id AND c.workspace_id = sqlc.arg(workspace_id) AND (sqlc.arg(tool) <> '' OR sqlc.arg(action_class) <> '' OR sqlc.arg(risk) <> '')
        LIMIT 1
    ) p ON true
) s
WHERE s.matched OR s.n = sqlc.arg(budget)
ORDER BY s.at DESC, s.id DESC
LIMIT sqlc.arg(page_limit);

-- name: ListApprovalsByID :many
-- What the inbox shows of a page's packets, without another query per
-- row: the agent token's name, the origin's title, the votes so far and
-- who decided. The page query chose the ids; the roles are checked again.
SELECT a.*, p.tool, p.action_class, p.risk, p.effect, p.arguments, p.rationale, p.conversation_id, p.notebook_id,
       p.proposed_by_kind, u.email AS proposer_email, t.name AS token_name,
       COALESCE(c.title, n.title, '') AS origin_title, r.email AS resolver_email,
       (SELECT count(*) FROM approval_votes v WHERE v.workspace_id = a.workspace_id AND v.approval_id = a.id) AS votes
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id AND p.workspace_id = a.workspace_id
JOIN users u ON u.id = p.proposed_by_user_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
LEFT JOIN users r ON r.id = a.resolved_by
WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.id = ANY (sqlc.arg(ids)::uuid[])
  AND a.resolver_roles && sqlc.arg(roles)::text[];

-- name: CountApprovals :many
-- The inbox's filter bar, in one query: for each status (and any status),
-- how many of the caller's packets match under the risk, tool and action
-- class filters; for the status filtered on, how many of each risk. Each
-- status reads at most @budget of its packets through an index, however
-- many there are: read = @budget means its counts stopped there (at
-- least that many). A packet's call is read only when a filter or the
-- risks need it.
SELECT c.status::text AS status, n.matched, n.high, n.medium, n.low, n.any_risk, n.read
FROM (VALUES ('pending'), ('approved'), ('rejected'), ('expired'), ('')) AS c (status)
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE s.ok AND (sqlc.arg(risk)::text = '' OR s.risk = sqlc.arg(risk))) AS matched,
           count(*) FILTER (WHERE s.ok AND s.risk = 'high') AS high,
           count(*) FILTER (WHERE s.ok AND s.risk = 'medium') AS medium,
           count(*) FILTER (WHERE s.ok AND s.risk = 'low') AS low,
           count(*) FILTER (WHERE s.ok) AS any_risk,
           count(*) AS read
    FROM (
        SELECT p.risk,
               (a.resolver_roles && sqlc.arg(roles)::text[]
                AND (sqlc.arg(tool)::text = '' OR p.tool = sqlc.arg(tool))
                AND (sqlc.arg(action_class)::text = '' OR p.action_class = sqlc.arg(action_class))) IS TRUE AS ok
        FROM (
            -- In an index's order, so that the read stops at the budget
            -- (a sequential scan with a filter could read every packet).
            (SELECT q.proposal_id, q.resolver_roles FROM approvals q
             WHERE c.status <> '' AND q.workspace_id = sqlc.arg(workspace_id) AND q.status = c.status
             ORDER BY q.expires_at, q.id
             LIMIT sqlc.arg(budget))
            UNION ALL
            (SELECT q.proposal_id, q.resolver_roles FROM approvals q
             WHERE c.status = '' AND q.workspace_id = sqlc.arg(workspace_id)
             ORDER BY q.created_at DESC, q.id DESC
             LIMIT sqlc.arg(budget))
        ) a
        LEFT JOIN LATERAL (
            SELECT x.tool, x.action_class, x.risk::text AS risk FROM proposals x
            WHERE x.id = a.proposal_id AND x.workspace_id = sqlc.arg(workspace_id)
              AND (c.status = sqlc.arg(status)::text OR sqlc.arg(risk) <> '' OR sqlc.arg(tool) <> '' OR sqlc.arg(action_class) <> '')
            LIMIT 1
        ) p ON true
    ) s
) n;

-- name: AddApprovalVote :execrows
-- A second vote by the same person changes nothing.
INSERT INTO approval_votes (workspace_id, approval_id, user_id, constraints) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING;

-- name: ListApprovalVotes :many
-- Who approved, with the constraints each attached.
SELECT user_id, constraints FROM approval_votes WHERE workspace_id = $1 AND approval_id = $2 ORDER BY created_at;

-- name: ResolveApproval :one
-- pending → approved | rejected: of concurrent approvers exactly one wins.
UPDATE approvals SET status = sqlc.arg(status), constraints = sqlc.arg(constraints), rejection_reason = sqlc.arg(rejection_reason),
       resolved_by = sqlc.arg(resolved_by), resolved_at = now()
WHERE id = sqlc.arg(id) AND workspace_id = sqlc.arg(workspace_id) AND status = 'pending' AND expires_at > now()
RETURNING *;

-- name: ExpireApprovals :many
-- The sweeper: pending packets past their expiry become expired, and so do
-- their proposals.
WITH expired AS (
    UPDATE approvals SET status = 'expired', resolved_at = now()
    WHERE status = 'pending' AND expires_at <= now()
    RETURNING id, proposal_id, workspace_id
)
UPDATE proposals p SET status = 'expired', resolved_at = now()
FROM expired e
WHERE p.id = e.proposal_id AND p.status = 'pending_approval'
RETURNING p.id, p.workspace_id, e.id AS approval_id;

-- name: CountPendingApprovals :one
-- The header's count of the packets a user may resolve (their roles, not
-- their own proposals): it reads at most @budget pending packets, soonest
-- expiry first, and stops at @cap matches.
SELECT count(*) FROM (
    SELECT 1
    FROM (
        SELECT q.proposal_id, q.resolver_roles FROM approvals q
        WHERE q.workspace_id = sqlc.arg(workspace_id) AND q.status = 'pending' AND q.expires_at > now()
        ORDER BY q.expires_at, q.id
        LIMIT sqlc.arg(budget)
    ) a
    CROSS JOIN LATERAL (SELECT x.proposed_by_user_id FROM proposals x WHERE x.id = a.proposal_id AND x.workspace_id = sqlc.arg(workspace_id) LIMIT 1) p
    WHERE a.resolver_roles && sqlc.arg(roles)::text[] AND p.proposed_by_user_id <> sqlc.arg(user_id)::uuid
    LIMIT sqlc.arg(cap)
) s;

-- name: GetApprovalDetail :one
SELECT a.*, p.tool, p.action_class, p.risk, p.effect, p.arguments, p.rationale, p.conversation_id, p.notebook_id,
       p.proposed_by_kind, u.email AS proposer_email, p.proposed_by_user_id, p.decision, p.status AS proposal_status,
       p.result, p.error, p.applied_arguments, p.effect_decision, p.owner_id, t.name AS token_name,
       COALESCE(c.title, n.title, '') AS origin_title, r.email AS resolver_email
FROM approvals a
JOIN proposals p ON p.id = a.proposal_id AND p.workspace_id = a.workspace_id
JOIN users u ON u.id = p.proposed_by_user_id
LEFT JOIN api_tokens t ON t.id = p.proposed_by_token_id
LEFT JOIN conversations c ON c.id = p.conversation_id
LEFT JOIN notebooks n ON n.id = p.notebook_id
LEFT JOIN users r ON r.id = a.resolved_by
WHERE a.id = $1 AND a.workspace_id = $2;

-- name: ListApprovalVotesDetail :many
-- The votes so far, for the approver: who and when.
SELECT v.user_id, u.email, v.created_at FROM approval_votes v
JOIN users u ON u.id = v.user_id
WHERE v.workspace_id = $1 AND v.approval_id = $2 ORDER BY v.created_at, u.email;

-- name: ListSimilarProposals :many
-- The history of similar calls: the latest calls of the same action class
-- in the workspace that someone decided (a person, or the automatic path
-- on its principal's behalf), newest first, through proposals_decided_idx.
SELECT id, tool, status, arguments, created_at, resolved_at, apply_path FROM proposals
WHERE workspace_id = $1 AND action_class = $2 AND resolved_by_user_id IS NOT NULL AND id <> $3
ORDER BY created_at DESC LIMIT 10;

-- name: Notify :exec
-- Tells every instance's live pages that something changed (delivered at
-- commit).
SELECT pg_notify('gatehouse_events', sqlc.arg(payload)::text);

-- name: ReconcileApprovedButNotRun :many
-- A packet approved whose proposal never left pending_approval (a crash
-- between two steps of an older version): the call did not run, and it is
-- not run now; the proposal fails with the reason.
UPDATE proposals p SET status = 'failed', resolved_at = now(),
       error = 'The approval was recorded but the call never started; nothing ran. Propose it again if it is still needed.'
FROM approvals a
WHERE a.proposal_id = p.id AND a.status = 'approved' AND p.status = 'pending_approval'
RETURNING p.id, p.workspace_id, a.id AS approval_id;

-- name: ReconcileRejectedOrExpired :many
-- A packet rejected or expired whose proposal still waits: it follows the packet.
UPDATE proposals p SET status = CASE a.status WHEN 'rejected' THEN 'rejected' ELSE 'expired' END,
       rejection_reason = CASE a.status WHEN 'rejected' THEN a.rejection_reason END, resolved_at = now()
FROM approvals a
WHERE a.proposal_id = p.id AND a.status IN ('rejected', 'expired') AND p.status = 'pending_approval'
RETURNING p.id, p.workspace_id, a.id AS approval_id, a.status AS approval_status;

-- name: ReconcileOrphanedPackets :many
-- A packet still pending whose proposal was resolved some other way: the
-- packet follows the proposal, so the queue never offers a call that
-- cannot run.
UPDATE approvals a SET status = CASE p.status WHEN 'rejected' THEN 'rejected' WHEN 'expired' THEN 'expired' ELSE 'approved' END,
       resolved_at = now()
FROM proposals p
WHERE a.proposal_id = p.id AND a.status = 'pending' AND p.status IN ('applying', 'applied', 'failed', 'rejected', 'expired')
RETURNING a.id, a.workspace_id, p.id AS proposal_id, p.status AS proposal_status;

-- name: EscalateApprovals :many
-- The sweeper (on a clock it is given: @now): pending packets whose
-- escalation is due and that have not expired are escalated, at most
-- @max_rows at a time, soonest first (approvals_escalate_idx). An
-- escalation happens once; SKIP LOCKED leaves a packet being resolved to
-- its approver (escalating it a moment later changes nothing if it is
-- still pending then).
WITH due AS (
    SELECT q.workspace_id, q.id FROM approvals q
    WHERE q.status = 'pending' AND q.escalated_at IS NULL AND q.escalate_at IS NOT NULL
      AND q.escalate_at <= sqlc.arg(now)::timestamptz AND q.expires_at > sqlc.arg(now)::timestamptz
    ORDER BY q.escalate_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
)
UPDATE approvals a SET escalated_at = sqlc.arg(now)::timestamptz
FROM due
WHERE a.workspace_id = due.workspace_id AND a.id = due.id
RETURNING a.workspace_id, a.id, a.proposal_id, a.approver_role, a.escalate_to, a.escalate_at, a.created_at;
