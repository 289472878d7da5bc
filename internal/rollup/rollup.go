// Package rollup folds the rows of insert-ordered tables into aggregates,
// off the call path: a table's bigint identity ids are its feed, and a
// watermark per feed (rollup_feeds) says how far it is folded. The /trust
// page's evidence totals (internal/trust) and the calls' days of the
// intent view (internal/intent) are kept this way; the pages read the
// aggregates plus the rows after the watermark, in one snapshot.
//
// Ids are drawn in order but committed out of order: a transaction that
// drew id 7 may commit after the one that drew id 8. So a feed folds up to
// an id only once it is safe: the worker notes the largest visible id and
// the transactions writing the table at that moment (pg_locks: an insert
// takes the table's RowExclusiveLock before it draws an id and holds it to
// the end), and folds up to that id when every one of them has ended.
// That holds while each backend draws ids one at a time from the
// sequence (CACHE 1, PostgreSQL's default; a test checks it).
package rollup

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
)

// Feed is one table the roll-up folds. Its name is the table's and its
// rollup_feeds row's.
type Feed struct {
	Name string
	// Tables are the tables whose rows draw the feed's ids, when the
	// feed is not one table's (nil: the table Name): their writers are
	// the transactions a candidate waits for. Feeds of one process with
	// the same tables share what they read of them for a moment
	// (shareFor): a candidate (the head and its writers), and whether a
	// candidate's writers have ended. So their Head must read the same
	// id (every feed of audit_events reads AuditHead).
	Tables []string
	// Head is the largest id visible in the table.
	Head func(ctx context.Context, q *db.Queries) (int64, error)
	// Fold folds rows with ids in (after, upto] into the aggregates, in
	// q's transaction, and returns the id it folded up to: upto, or less
	// to stop after a batch.
	Fold func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error)
	// Also runs in the same transaction on every turn that holds the
	// feed, folded or not (nil: nothing): housekeeping that must not run
	// beside a fold.
	Also func(ctx context.Context, q *db.Queries) error
	// GenericPlans makes the turn's statements use their generic plans,
	// without JIT compilation (plan_cache_mode force_generic_plan and jit
	// off, for the turn's transaction): for folds that read an id range
	// of audit_events, a partitioned table, where a custom plan for every
	// turn cost more to make than the turn cost to run (at 1M audit rows,
	// FoldNotifications: 4.4 ms planned and run, 0.45 ms generic; all the
	// audit feeds together planned for about 0.2 of PostgreSQL's cores
	// under the bench's load). A generic plan's estimates assume ranges
	// of unknown size, so its cost can pass jit_above_cost, and compiling
	// took 100 ms of a 1.6 ms fold (CallEvents): hence jit off. The plan
	// reads the id range through each partition's primary key; a
	// partition that was empty when it was planned is read whole until
	// autovacuum analyzes it, which replans it (a minute at most).
	GenericPlans bool
}

// Progress is what a turn did.
type Progress struct {
	// Folded is how far the watermark moved (in ids).
	Folded int64
	// Moved: the watermark or the candidate moved (rows are coming in).
	Moved bool
	// More: rows that are safe to fold are left (call again now).
	More bool
	// Busy: another worker holds the feed.
	Busy bool
}

// Advance takes one turn on the feed in one transaction: if the feed is
// free, it folds the rows that are safe to fold (a batch of them) and, once
// it has folded up to its candidate, notes the next candidate. A turn with
// nothing to do writes nothing: no WAL, no transaction id (an idle
// instance took about 30 a second when each turn locked the feed's row).
func Advance(ctx context.Context, pool *pgxpool.Pool, f Feed) (Progress, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return Progress{}, fmt.Errorf("rollup: %s: begin: %w", f.Name, err)
	}
	defer tx.Rollback(ctx)
	q := db.New(tx)
	hold, err := q.TryHoldRollupFeed(ctx, db.TryHoldRollupFeedParams{Feed: f.Name, Generic: f.GenericPlans})
	if err != nil {
		return Progress{}, fmt.Errorf("rollup: %s: hold: %w", f.Name, err)
	}
	if !hold.Held {
		return Progress{Busy: true}, nil
	}
	st, err := q.GetRollupFeed(ctx, f.Name)
	if err != nil {
		return Progress{}, fmt.Errorf("rollup: %s: read: %w", f.Name, err)
	}
	shared := sharedFor(pool)
	safe := st.FoldedTo
	if st.NextTo > st.FoldedTo {
		gone, err := shared.writersGone(ctx, q, st.NextWriters)
		if err != nil {
			return Progress{}, fmt.Errorf("rollup: %s: writers: %w", f.Name, err)
		}
		if gone {
			safe = st.NextTo
		}
	}
	to := st.FoldedTo
	if safe > to {
		if to, err = f.Fold(ctx, q, st.FoldedTo, safe); err != nil {
			return Progress{}, fmt.Errorf("rollup: %s: fold (%d, %d]: %w", f.Name, st.FoldedTo, safe, err)
		}
		if to <= st.FoldedTo || to > safe {
			return Progress{}, fmt.Errorf("rollup: %s: fold (%d, %d] stopped at %d", f.Name, st.FoldedTo, safe, to)
		}
	}
	if f.Also != nil {
		if err := f.Also(ctx, q); err != nil {
			return Progress{}, fmt.Errorf("rollup: %s: %w", f.Name, err)
		}
	}
	next, writers := st.NextTo, st.NextWriters
	if next <= to {
		// The candidate is folded (or there was none): the next one is
		// the largest id visible now, with the transactions writing the
		// table after it was read; or such a pair another feed of the
		// same tables read a moment ago.
		if c, ok := shared.candidate(f.tablesKey(), to); ok {
			next, writers = c.head, c.writers
		} else {
			head, err := f.Head(ctx, q)
			if err != nil {
				return Progress{}, fmt.Errorf("rollup: %s: head: %w", f.Name, err)
			}
			next, writers = max(head, to), nil
			if next > to {
				if writers, err = f.writers(ctx, q); err != nil {
					return Progress{}, fmt.Errorf("rollup: %s: writers: %w", f.Name, err)
				}
				shared.noteCandidate(f.tablesKey(), next, writers)
			}
		}
	}
	moved := to != st.FoldedTo || next != st.NextTo || !slices.Equal(writers, st.NextWriters)
	if moved {
		if writers == nil {
			writers = []string{}
		}
		if err := q.SetRollupFeed(ctx, db.SetRollupFeedParams{Feed: f.Name, FoldedTo: to, NextTo: next, NextWriters: writers}); err != nil {
			return Progress{}, fmt.Errorf("rollup: %s: set watermark: %w", f.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return Progress{}, fmt.Errorf("rollup: %s: commit: %w", f.Name, err)
	}
	// More now: a batch of what is safe is left, or the new candidate had
	// no transaction writing the table, so it is safe already.
	fresh := next > to && next != st.NextTo && len(writers) == 0
	return Progress{Folded: to - st.FoldedTo, Moved: moved, More: to < safe || fresh}, nil
}

// tables are the tables whose rows draw the feed's ids.
func (f Feed) tables() []string {
	if len(f.Tables) == 0 {
		return []string{f.Name}
	}
	return f.Tables
}

// tablesKey names the feed's tables, for what feeds share.
func (f Feed) tablesKey() string {
	t := slices.Clone(f.tables())
	slices.Sort(t)
	return strings.Join(t, ",")
}

// writers are the transactions writing the feed's tables now.
func (f Feed) writers(ctx context.Context, q *db.Queries) ([]string, error) {
	tables := f.tables()
	var all []string
	for _, t := range tables {
		w, err := q.RollupWriters(ctx, t)
		if err != nil {
			return nil, err
		}
		all = append(all, w...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// Step is one feed's turn (a service's RollUp).
type Step func(ctx context.Context) (Progress, error)

// busyEvery is how soon the next turn comes while rows are coming in: the
// pages read the rows after the watermark, so a short lag keeps them few.
const busyEvery = 100 * time.Millisecond

// Run takes turns on every step until ctx ends: every so often when
// nothing happens, every busyEvery while rows come in, at once again while
// a step has more to fold. A failing database slows it down to a try every
// few seconds.
func Run(ctx context.Context, log *slog.Logger, every time.Duration, steps ...Step) {
	if len(steps) == 0 {
		return
	}
	wait := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		more, moved, failed := false, false, false
		for _, step := range steps {
			p, err := step(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("rolling up", "err", err)
				failed = true
			}
			more, moved = more || p.More, moved || p.Moved
		}
		switch {
		case failed:
			wait = min(max(2*wait, every), 5*time.Second)
		case more:
			wait = 0
		case moved:
			wait = min(busyEvery, every)
		default:
			wait = every
		}
	}
}

// shareFor is how long the feeds of one process use what another of them
// read of the same tables in pg_locks: a candidate, or that a candidate's
// writers have ended. Five feeds fold audit_events; each read
// pg_locks twice a turn, which copies the whole lock table under every
// lock partition's lock (0.5 s of PostgreSQL in 10 s of the bench's
// records.put at 8 clients, beside calls waiting for those partitions).
// A turn comes every busyEvery while rows come in, so one read serves a
// round of turns.
const shareFor = busyEvery / 2

// sharedByPool is what this process's feeds read of their tables'
// writers, per database (per pool: tests run many databases in one
// process, and one database's candidate says nothing of another's).
var sharedByPool sync.Map // *pgxpool.Pool -> *sharedReads

func sharedFor(pool *pgxpool.Pool) *sharedReads {
	if s, ok := sharedByPool.Load(pool); ok {
		return s.(*sharedReads)
	}
	s, _ := sharedByPool.LoadOrStore(pool, &sharedReads{candidates: map[string]candidate{}, ended: map[string]time.Time{}})
	return s.(*sharedReads)
}

type sharedReads struct {
	mu         sync.Mutex
	candidates map[string]candidate // by tables key
	ended      map[string]time.Time // writers (joined) found ended, when
}

// candidate is a head and the transactions that were writing its tables
// after it was read: a pair that stays true (ids up to head are visible
// or theirs), only less recent.
type candidate struct {
	head    int64
	writers []string
	at      time.Time
}

// candidate is the latest pair read of tables within shareFor, when its
// head is beyond after.
func (s *sharedReads) candidate(tables string, after int64) (candidate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.candidates[tables]
	if !ok || time.Since(c.at) > shareFor || c.head <= after {
		return candidate{}, false
	}
	return candidate{head: c.head, writers: slices.Clone(c.writers), at: c.at}, true
}

func (s *sharedReads) noteCandidate(tables string, head int64, writers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.candidates[tables] = candidate{head: head, writers: slices.Clone(writers), at: time.Now()}
}

// writersGone says whether every one of writers has ended: at once for
// none, from another feed that found them ended within shareFor, or from
// pg_locks. That they had not ended is not shared: they may end the next
// moment, and a feed folds as soon as it sees it. (An end is shared for
// shareFor only: a virtual transaction id is not reused while the cluster
// runs, but may be after a restart.)
func (s *sharedReads) writersGone(ctx context.Context, q *db.Queries, writers []string) (bool, error) {
	if len(writers) == 0 {
		return true, nil
	}
	key := strings.Join(writers, ",")
	s.mu.Lock()
	at, ok := s.ended[key]
	s.mu.Unlock()
	if ok && time.Since(at) <= shareFor {
		return true, nil
	}
	gone, err := q.RollupWritersGone(ctx, writers)
	if err != nil || !gone {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, old := range s.ended { // a handful: the candidates of the last moment
		if time.Since(old) > shareFor {
			delete(s.ended, k)
		}
	}
	s.ended[key] = time.Now()
	return true, nil
}
