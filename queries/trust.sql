-- Trust graduation: explicit evidence, violations, thresholds, and what
-- the posterior and the /trust page read. (The outcome's own evidence is
-- written with InsertEvidence, in evidence.sql.)

-- name: InsertExplicitEvidence :one
INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight,
                      receipt_id, proposal_id, recorded_by, note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING *;

-- name: LockEvidenceForProposal :exec
-- Serialises explicit evidence about one proposal (an agent records at
-- most one), for the rest of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('gatehouse.evidence:' || sqlc.arg(proposal_id)::uuid::text, 0));

-- name: CountEvidenceForProposal :one
SELECT count(*) FROM evidence WHERE workspace_id = $1 AND proposal_id = $2 AND provenance = $3;

-- name: GetProposalActionClass :one
-- What explicit evidence about a proposal checks: that it is in the
-- workspace, and its class.
SELECT action_class FROM proposals WHERE id = $1 AND workspace_id = $2;

-- name: GetReceiptForTrust :one
-- A receipt of the workspace as evidence and violations refer to it.
SELECT id, kind, action_class, proposal_id FROM receipts WHERE id = $1 AND workspace_id = $2;

-- name: EvidenceTotals :many
-- Each class's evidence summed, for the posterior, the approval rate and
-- the graduation hints: the roll-up's totals plus the rows it has not
-- folded yet (at most tail_cap of them; tail_rows says how many were
-- read), in one snapshot. The sums are numeric: the same whatever order
-- the rows were added in.
WITH tail AS (
    SELECT c.* FROM evidence_contributions c
    WHERE c.workspace_id = @workspace_id AND c.id > (SELECT f.folded_to FROM rollup_feeds f WHERE f.feed = 'evidence')
    ORDER BY c.id
    LIMIT sqlc.arg(tail_cap)::int
), parts AS (
    SELECT t.action_class, t.positive, t.negative, t.samples, t.rows, t.judged_approvals, t.judgments, t.approvals, t.edits, t.rejections
    FROM evidence_totals t WHERE t.workspace_id = @workspace_id
    UNION ALL
    SELECT action_class, positive, negative, samples, 1, judged_approvals, judgments, approvals, edits, rejections FROM tail
)
SELECT action_class,
       sum(positive)::float8 AS positive, sum(negative)::float8 AS negative, sum(samples)::bigint AS samples, sum(rows)::bigint AS rows,
       sum(judged_approvals)::bigint AS judged_approvals, sum(judgments)::bigint AS judgments,
       sum(approvals)::bigint AS approvals, sum(edits)::bigint AS edits, sum(rejections)::bigint AS rejections,
       (SELECT count(*) FROM tail)::int AS tail_rows
FROM parts
GROUP BY action_class
ORDER BY action_class;

-- name: LatestEvidence :many
-- The latest rows of each class (at most per_class of them), newest first,
-- with the scope of the proposal they are about, for a link: per class,
-- through evidence_class_idx, however many rows the class has.
SELECT e.id, e.action_class, e.label, e.provenance, e.weight, e.receipt_id, e.proposal_id, e.note, e.created_at,
       p.conversation_id, p.notebook_id
FROM unnest(sqlc.arg(classes)::text[]) AS c (action_class)
CROSS JOIN LATERAL (
    SELECT ev.* FROM evidence ev
    WHERE ev.workspace_id = @workspace_id AND ev.action_class = c.action_class
    ORDER BY ev.created_at DESC, ev.id DESC
    LIMIT sqlc.arg(per_class)::int
) e
LEFT JOIN LATERAL (
    SELECT pr.conversation_id, pr.notebook_id FROM proposals pr
    WHERE pr.id = e.proposal_id AND pr.workspace_id = e.workspace_id
    LIMIT 1 -- each by its key, never a join over every proposal
) p ON true
ORDER BY e.action_class, e.created_at DESC, e.id DESC;

-- name: EvidenceHead :one
-- The largest evidence id visible: the roll-up's next watermark.
SELECT coalesce(max(id), 0)::bigint FROM evidence;

-- name: EvidenceBatchEnd :one
-- Where a batch of the roll-up ends: the id of the max_rows-th row after
-- after (or upto when there are fewer).
SELECT coalesce((SELECT e.id FROM evidence e WHERE e.id > @after AND e.id <= @upto ORDER BY e.id OFFSET sqlc.arg(max_rows)::int - 1 LIMIT 1),
                @upto)::bigint;

-- name: FoldEvidence :execrows
-- Adds the evidence rows with ids in (after, upto] to their classes' totals.
INSERT INTO evidence_totals AS t (workspace_id, action_class, positive, negative, samples, rows, judged_approvals, judgments, approvals, edits, rejections)
SELECT c.workspace_id, c.action_class, sum(c.positive), sum(c.negative), sum(c.samples), count(*), sum(c.judged_approvals), sum(c.judgments),
       sum(c.approvals), sum(c.edits), sum(c.rejections)
FROM evidence_contributions c
WHERE c.id > @after AND c.id <= @upto
GROUP BY c.workspace_id, c.action_class
ON CONFLICT (workspace_id, action_class) DO UPDATE
    SET positive = t.positive + EXCLUDED.positive, negative = t.negative + EXCLUDED.negative, samples = t.samples + EXCLUDED.samples,
        rows = t.rows + EXCLUDED.rows, judged_approvals = t.judged_approvals + EXCLUDED.judged_approvals,
        judgments = t.judgments + EXCLUDED.judgments, approvals = t.approvals + EXCLUDED.approvals, edits = t.edits + EXCLUDED.edits,
        rejections = t.rejections + EXCLUDED.rejections;

-- name: InsertViolation :one
INSERT INTO trust_violations (workspace_id, action_class, receipt_id, category, reason, flagged_by)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING *;

-- name: GetViolationForUpdate :one
SELECT * FROM trust_violations WHERE id = $1 AND workspace_id = $2 FOR UPDATE;

-- name: ClearViolation :one
UPDATE trust_violations SET cleared_at = now(), cleared_by = $2, clear_note = $3
WHERE id = $1 AND workspace_id = $4 AND cleared_at IS NULL
RETURNING *;

-- name: ListViolations :many
-- Newest first; only the open ones when open_only.
SELECT v.*, coalesce(fu.email, '')::text AS flagged_by_email, coalesce(cu.email, '')::text AS cleared_by_email
FROM trust_violations v
LEFT JOIN users fu ON fu.id = v.flagged_by
LEFT JOIN users cu ON cu.id = v.cleared_by
WHERE v.workspace_id = $1 AND (NOT sqlc.arg(open_only)::bool OR v.cleared_at IS NULL)
ORDER BY v.created_at DESC, v.id
LIMIT sqlc.arg(max_rows)::int;

-- name: OpenViolationClasses :many
SELECT DISTINCT action_class FROM trust_violations WHERE workspace_id = $1 AND cleared_at IS NULL ORDER BY action_class;

-- name: ListTrustThresholds :many
SELECT * FROM trust_thresholds WHERE workspace_id = $1 ORDER BY action_class;

-- name: GetTrustThresholdForUpdate :one
SELECT * FROM trust_thresholds WHERE workspace_id = $1 AND action_class = $2 FOR UPDATE;

-- name: LockTrustThresholds :exec
-- Serialises threshold changes in a workspace (the row may not exist yet).
SELECT pg_advisory_xact_lock(hashtextextended('gatehouse.trust_thresholds:' || sqlc.arg(workspace_id)::uuid::text, 0));

-- name: UpsertTrustThreshold :one
INSERT INTO trust_thresholds (workspace_id, action_class, ci_low, min_samples)
VALUES ($1, $2, $3, $4)
ON CONFLICT (workspace_id, action_class) DO UPDATE SET ci_low = EXCLUDED.ci_low, min_samples = EXCLUDED.min_samples, updated_at = now()
RETURNING *;

-- name: GetTrustThreshold :one
SELECT * FROM trust_thresholds WHERE workspace_id = $1 AND action_class = $2;
