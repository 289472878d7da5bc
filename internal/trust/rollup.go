package trust

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

// Evidence is summed per class by a roll-up (internal/rollup): a worker
// folds new evidence rows into evidence_totals, a batch at a time, off the
// call path, and the pages read the totals plus the rows it has not
// folded yet, in one statement. The sums are numeric, so the posterior is
// the one every row gives, whatever the batches were.

// EvidenceFeed is the evidence table's feed.
const EvidenceFeed = "evidence"

// EvidenceTailCap is how many rows after the watermark a read adds at
// most; past it the page says it is updating (the roll-up is behind).
const EvidenceTailCap = 10000

// evidenceFoldBatch is how many evidence rows one transaction folds.
const evidenceFoldBatch = 5000

// classTotals are a class's evidence summed.
type classTotals struct {
	Positive, Negative float64
	Samples, Rows      int64
	// JudgedApprovals of Judgments: the approval rate (people's judgments).
	JudgedApprovals, Judgments int64
	// Approvals, Edits, Rejections: every row's label, for the hints.
	Approvals, Edits, Rejections int64
}

func (t classTotals) tally() Tally {
	return Tally{Positive: t.Positive, Negative: t.Negative, Samples: int(t.Samples)}
}

// evidenceTotals reads every class's totals in the workspace, and whether
// the rows after the watermark were more than a read adds.
func evidenceTotals(ctx context.Context, q *db.Queries, ws uuid.UUID) (map[string]classTotals, bool, error) {
	rows, err := q.EvidenceTotals(ctx, db.EvidenceTotalsParams{WorkspaceID: ws, TailCap: EvidenceTailCap})
	if err != nil {
		return nil, false, fmt.Errorf("trust: evidence totals: %w", err)
	}
	out := make(map[string]classTotals, len(rows))
	updating := false
	for _, r := range rows {
		out[r.ActionClass] = classTotals{Positive: r.Positive, Negative: r.Negative, Samples: r.Samples, Rows: r.Rows,
			JudgedApprovals: r.JudgedApprovals, Judgments: r.Judgments, Approvals: r.Approvals, Edits: r.Edits, Rejections: r.Rejections}
		updating = updating || r.TailRows >= EvidenceTailCap
	}
	return out, updating, nil
}

// evidenceFeed folds evidence rows into evidence_totals, batch rows per
// transaction.
func evidenceFeed(batch int32) rollup.Feed {
	return rollup.Feed{Name: EvidenceFeed,
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.EvidenceHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
			end, err := q.EvidenceBatchEnd(ctx, db.EvidenceBatchEndParams{After: after, Upto: upto, MaxRows: batch})
			if err != nil {
				return 0, err
			}
			if _, err := q.FoldEvidence(ctx, db.FoldEvidenceParams{After: after, Upto: end}); err != nil {
				return 0, err
			}
			return end, nil
		},
	}
}

// RollUp takes a turn of the evidence roll-up (on every instance: one at
// a time folds).
func (s *Service) RollUp(ctx context.Context) (rollup.Progress, error) {
	return rollup.Advance(ctx, s.pool, evidenceFeed(evidenceFoldBatch))
}
