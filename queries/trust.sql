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

-- name: EvidenceTallies :many
-- Each class's evidence summed: the posterior's update.
SELECT action_class,
       coalesce(sum(weight) FILTER (WHERE weight > 0), 0)::float8  AS positive,
       coalesce(sum(-weight) FILTER (WHERE weight < 0), 0)::float8 AS negative,
       count(*) FILTER (WHERE weight <> 0)                         AS samples
FROM evidence
WHERE workspace_id = $1
GROUP BY action_class
ORDER BY action_class;

-- name: EvidenceTally :one
SELECT coalesce(sum(weight) FILTER (WHERE weight > 0), 0)::float8  AS positive,
       coalesce(sum(-weight) FILTER (WHERE weight < 0), 0)::float8 AS negative,
       count(*) FILTER (WHERE weight <> 0)                         AS samples,
       count(*)                                                    AS rows
FROM evidence
WHERE workspace_id = $1 AND action_class = $2;

-- name: LatestEvidence :many
-- The latest rows of each class (at most per_class of them), newest first,
-- with the scope of the proposal they are about, for a link.
SELECT e.id, e.action_class, e.label, e.provenance, e.weight, e.receipt_id, e.proposal_id, e.note, e.created_at,
       p.conversation_id, p.notebook_id
FROM (SELECT ev.*, row_number() OVER (PARTITION BY ev.action_class ORDER BY ev.created_at DESC, ev.id DESC) AS rank
      FROM evidence ev WHERE ev.workspace_id = $1) e
LEFT JOIN proposals p ON p.id = e.proposal_id AND p.workspace_id = e.workspace_id
WHERE e.rank <= sqlc.arg(per_class)::int
ORDER BY e.action_class, e.created_at DESC, e.id DESC;

-- name: JudgmentCounts :many
-- People's judgments per class (approved, minor_edit, edited,
-- heavy_rewrite, rejected; from receipts or the principal): the approval
-- rate's numerator and denominator.
SELECT action_class,
       count(*) FILTER (WHERE label IN ('approved', 'minor_edit')) AS approvals,
       count(*)                                                    AS judgments
FROM evidence
WHERE workspace_id = $1 AND provenance IN ('receipt', 'principal')
  AND label IN ('approved', 'minor_edit', 'edited', 'heavy_rewrite', 'rejected')
GROUP BY action_class;

-- name: DecisionTimes :many
-- How long calls a person decided waited, per class, since a time: from
-- the proposal to the person's decision (the claim of an owner's or an
-- approver's apply, or the rejection).
SELECT action_class::text AS action_class,
       count(*) AS decisions,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM coalesce(claimed_at, resolved_at) - created_at))::float8 AS median_seconds
FROM proposals
WHERE workspace_id = $1 AND action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL
  AND (apply_path IN ('human', 'approval') OR status = 'rejected')
  AND coalesce(claimed_at, resolved_at) IS NOT NULL
  AND created_at >= sqlc.arg(since)
GROUP BY action_class;

-- name: InsertViolation :one
INSERT INTO trust_violations (workspace_id, action_class, receipt_id, category, reason, flagged_by)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING *;

-- name: GetViolationForUpdate :one
SELECT * FROM trust_violations WHERE id = $1 AND workspace_id = $2 FOR UPDATE;

-- name: ClearViolation :one
UPDATE trust_violations SET cleared_at = now(), cleared_by = $2, clear_note = $3
WHERE id = $1 AND cleared_at IS NULL
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

-- name: CountEvidenceLabels :many
-- How often each label was given to the classes, in a workspace: what a
-- graduation hint says ("24 approvals, 0 rejections").
SELECT action_class, label, count(*)::int AS n
FROM evidence
WHERE workspace_id = $1 AND action_class = ANY (sqlc.arg(classes)::text[])
GROUP BY action_class, label;
