package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
)

// The audit page's time filter reads ids (migration 37): audit_hours
// holds, per workspace and UTC hour, the smallest and largest id of the
// audit rows created in it, so that a time range is a range of ids that
// the page's indexes read newest first. FoldHours keeps it, off the call
// path, from the rows that can no longer be joined by a row with a
// smaller id (the roll-up's audit_events watermark, internal/rollup).

// foldIDs is how many ids one FoldHours statement takes on.
const foldIDs = 20000

// FoldHours adds the audit rows the hours' map has not counted yet, up to
// the roll-up's watermark, a batch at a time; it returns how many ids it
// moved the map's watermark by (0: nothing to fold, or another instance
// folds now).
func FoldHours(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	q := db.New(pool)
	var total int64
	for {
		n, err := q.FoldAuditHours(ctx, foldIDs)
		if err != nil {
			return total, fmt.Errorf("audit: fold hours: %w", err)
		}
		total += n
		if n < foldIDs {
			return total, nil
		}
	}
}

// foldHoursEvery is how often the hours' map catches up: the rows after
// it are read one by one by a time-filtered page.
const foldHoursEvery = time.Second

// maintainHours runs FoldHours every foldHoursEvery until ctx ends.
func maintainHours(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	wait := foldHoursEvery
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := FoldHours(ctx, pool); err != nil && ctx.Err() == nil {
			log.Warn("folding audit hours", "err", err)
			wait = min(2*wait, 30*time.Second)
			continue
		}
		wait = foldHoursEvery
	}
}
