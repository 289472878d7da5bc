package audit

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
)

// The audit log is partitioned by when its rows expire (migration 37):
// first by retention band (short: rows kept two years or less; long: the
// others), then by the UTC month (short) or year (long) of their
// retention_until, so that audit_events_m202711 holds the short rows kept
// until some time in November 2027 and audit_events_y2033 the long rows
// kept until some time in 2033. A default partition per band takes the
// rows whose period has no partition yet. Retention is done by dropping
// whole partitions once their period is over: every row in such a
// partition is past its retention by the partition's own bound, and no
// row is ever deleted one by one.

// The bands, as gatehouse_audit_band names them.
const (
	BandShort = "short"
	BandLong  = "long"
)

// longAfter is the band's boundary: rows kept longer are long.
const longAfter = 730 * 24 * time.Hour

// aheadMonths is how many months of writes the partitions are made
// ahead for: this month and the next two.
const aheadMonths = 3

// Period is one partition's period: its band and the first instant (UTC)
// of the month (short) or year (long) whose rows it holds.
type Period struct {
	Band  string
	First time.Time
}

// PeriodOf is the period of the rows of band that expire at t.
func PeriodOf(band string, t time.Time) Period {
	t = t.UTC()
	if band == BandLong {
		return Period{band, time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	return Period{band, time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)}
}

// BandOf is the band of the rows kept for keep.
func BandOf(keep time.Duration) string {
	if keep > longAfter {
		return BandLong
	}
	return BandShort
}

// End is the instant the period ends: its partition can go from then on.
func (p Period) End() time.Time {
	if p.Band == BandLong {
		return p.First.AddDate(1, 0, 0)
	}
	return p.First.AddDate(0, 1, 0)
}

func (p Period) String() string {
	if p.Band == BandLong {
		return p.Band + " " + p.First.Format("2006")
	}
	return p.Band + " " + p.First.Format("2006-01")
}

// PeriodsAhead is the periods (by band, then in order) in which the rows
// written from the start of now's month to the end of the month after
// next expire, when kept for one of retentions.
func PeriodsAhead(now time.Time, retentions []time.Duration) []Period {
	now = now.UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, aheadMonths, 0)
	var periods []Period
	add := func(p Period) {
		if !slices.Contains(periods, p) {
			periods = append(periods, p)
		}
	}
	for _, keep := range retentions {
		if keep <= 0 {
			continue
		}
		band := BandOf(keep)
		// A month is longer than a day, so stepping by days meets every
		// period the writes of the three months expire in.
		for t := from; t.Before(to); t = t.Add(24 * time.Hour) {
			add(PeriodOf(band, t.Add(keep)))
		}
		add(PeriodOf(band, to.Add(-time.Nanosecond).Add(keep)))
	}
	slices.SortFunc(periods, func(a, b Period) int {
		if a.Band != b.Band {
			return strings.Compare(b.Band, a.Band) // short first
		}
		return a.First.Compare(b.First)
	})
	return periods
}

func date(t time.Time) pgtype.Date { return pgtype.Date{Time: t, Valid: true} }

// EnsurePartitions creates the partitions that the rows written this
// month and the next two, kept for DefaultRetention or one of retentions,
// go to, and a partition for every period the default partitions hold
// rows of (moving them into it). It returns how many it created. It is
// idempotent, and safe on several instances at once: each partition is
// created in a transaction of its own, under an advisory lock.
func EnsurePartitions(ctx context.Context, pool *pgxpool.Pool, now time.Time, retentions []time.Duration) (int, error) {
	q := db.New(pool)
	periods := PeriodsAhead(now, append([]time.Duration{DefaultRetention}, retentions...))
	waiting, err := q.AuditDefaultPeriods(ctx)
	if err != nil {
		return 0, fmt.Errorf("audit: periods in the default partitions: %w", err)
	}
	for _, w := range waiting {
		if p := PeriodOf(w.Band, w.Expiring.Time); !slices.Contains(periods, p) {
			periods = append(periods, p)
		}
	}
	created := 0
	for _, p := range periods {
		ok, err := q.EnsureAuditPartition(ctx, db.EnsureAuditPartitionParams{Band: p.Band, Expiring: date(p.First)})
		if err != nil {
			return created, fmt.Errorf("audit: partition %s: %w", p, err)
		}
		if ok {
			created++
			if err := analyzePartition(ctx, pool, q, p); err != nil {
				return created, err
			}
		}
	}
	return created, nil
}

// analyzePartition gathers a new partition's statistics at once. One made
// for rows waiting in a default partition holds them from the start, and
// until autovacuum got to it the planner knew nothing of them: on the
// bench's 1M database, a partition of 84,000 moved rows turned the
// conversations list's 0.1 ms read of the newest ids into 33 ms (every
// one of its indexes looked as good as its primary key).
func analyzePartition(ctx context.Context, pool *pgxpool.Pool, q *db.Queries, p Period) error {
	name, err := q.AuditPartitionName(ctx, db.AuditPartitionNameParams{Band: p.Band, Expiring: date(p.First)})
	if err != nil {
		return fmt.Errorf("audit: partition %s: %w", p, err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("audit: analyze %s: %w", name, err)
	}
	return nil
}

// MaintainPartitions runs EnsurePartitions at once and then every so
// often until ctx ends, with the retentions in force at each turn (tools
// come and go); after a failure it tries again within a minute.
func MaintainPartitions(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, every time.Duration, retentions func() []time.Duration) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		n, err := EnsurePartitions(ctx, pool, time.Now(), retentions())
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("creating audit partitions", "err", err)
			wait = min(time.Minute, every)
		case n > 0:
			log.Info("audit partitions created", "count", n)
			wait = every
		default:
			wait = every
		}
	}
}

// StartMaintenance runs the audit log's background work until the
// function it returns is called (which waits for it to end): the
// partitions ahead (MaintainPartitions, every hour, with the retentions
// in force) and the time filter's map of hours to ids (FoldHours, every
// second). Every instance runs it; each step is safe beside another's.
func StartMaintenance(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, retentions func() []time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		MaintainPartitions(ctx, pool, log, time.Hour, retentions)
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		maintainHours(ctx, pool, log)
	}()
	return func() { cancel(); <-done; <-done }
}

// Purged is what Purge dropped: whole partitions, and the rows they held.
type Purged struct {
	Partitions int
	Rows       int64
}

// Purge drops the partitions of the periods that ended by now: every row
// in one is past its retention. Rows of such a period still in a default
// partition are first moved into a partition of their own, dropped with
// the others; the default partitions' other rows, and every row of a
// period not over, stay. Each partition is detached (a moment's ACCESS
// EXCLUSIVE lock on its band) and then counted and dropped, each step in
// a transaction of its own; a partition left detached by a purge that
// stopped half-way is dropped by the next.
func Purge(ctx context.Context, pool *pgxpool.Pool, now time.Time) (Purged, error) {
	q := db.New(pool)
	over := func(p Period) bool { return !p.End().After(now) }
	waiting, err := q.AuditDefaultPeriods(ctx)
	if err != nil {
		return Purged{}, fmt.Errorf("audit: purge: periods in the default partitions: %w", err)
	}
	for _, w := range waiting {
		if p := PeriodOf(w.Band, w.Expiring.Time); over(p) {
			if _, err := q.EnsureAuditPartition(ctx, db.EnsureAuditPartitionParams{Band: p.Band, Expiring: date(p.First)}); err != nil {
				return Purged{}, fmt.Errorf("audit: purge: partition %s: %w", p, err)
			}
		}
	}
	parts, err := q.ListAuditPartitions(ctx)
	if err != nil {
		return Purged{}, fmt.Errorf("audit: purge: list partitions: %w", err)
	}
	var purged Purged
	for _, part := range parts {
		p := PeriodOf(part.Band, part.Expiring.Time)
		if !over(p) {
			continue
		}
		if part.Attached {
			if _, err := q.DetachAuditPartition(ctx, db.DetachAuditPartitionParams{Band: p.Band, Expiring: date(p.First), ExpiredBy: now}); err != nil {
				return purged, fmt.Errorf("audit: purge: detach %s: %w", p, err)
			}
		}
		n, err := q.DropAuditPartition(ctx, db.DropAuditPartitionParams{Band: p.Band, Expiring: date(p.First), ExpiredBy: now})
		if err != nil {
			return purged, fmt.Errorf("audit: purge: drop %s: %w", p, err)
		}
		purged.Partitions++
		purged.Rows += n
	}
	return purged, nil
}
