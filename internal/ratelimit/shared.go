// Package ratelimit counts calls against a limit in memory, on the call
// path, and shares the counts between server instances through PostgreSQL
// off it.
//
// A durable counter (a row upserted inside the call's transaction) is
// exact across instances, but the row stays locked through the commit's
// fsync: every call of the same caller and tool waits for the previous
// one's commit, which cut the automatic path's throughput about three
// times (issue 32's study). Reads and idempotent writes take that path, so
// their limits (the authority classes' ~120 and ~60 a minute per agent)
// are counted here instead: each instance counts its own calls in fixed
// windows, and at most every SyncEvery (while calls come) adds what it
// counted to the shared row of each window and learns what the other
// instances counted. One instance is exact; several may together admit
// more than the limit by what the others admitted since their last sync.
package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/db"
)

// SyncEvery is how often, at most, an instance shares its counts, by
// default.
const SyncEvery = time.Second

// syncTimeout bounds one sync: a slow database delays the sharing, never
// a call.
const syncTimeout = 5 * time.Second

// Shared is one instance's counts. It is safe for concurrent use.
type Shared struct {
	q   *db.Queries
	log *slog.Logger

	// syncMu serialises syncs: two at once would tell the same calls twice.
	syncMu   sync.Mutex
	mu       sync.Mutex
	windows  map[windowKey]*window
	every    time.Duration
	syncing  bool
	lastSync time.Time
}

// windowKey names a window by its start in Unix nanoseconds: times read
// back from the database differ from the counted ones in location.
type windowKey struct {
	bucket string
	start  int64
}

// window is one bucket's fixed window: the calls this instance counted,
// how many of them it has told the database, and the other instances'
// count as of the last sync.
type window struct {
	end                 time.Time
	local, told, others int
}

// New returns an empty set of counts shared through q.
func New(q *db.Queries, log *slog.Logger) *Shared {
	return &Shared{q: q, log: log, windows: map[windowKey]*window{}, every: SyncEvery, lastSync: time.Now()}
}

// SetSyncEvery sets how often, at most, the instance shares its counts
// while calls come.
func (s *Shared) SetSyncEvery(d time.Duration) {
	s.mu.Lock()
	s.every = d
	s.mu.Unlock()
}

// Take counts one call in bucket's window of the given length at now,
// unless the window already holds limit calls (this instance's and the
// others' as last shared); refused, it returns how long until the window
// ends. A refused call is not counted.
func (s *Shared) Take(bucket string, limit int, length time.Duration, now time.Time) (bool, time.Duration) {
	start := now.Truncate(length)
	k := windowKey{bucket, start.UnixNano()}
	s.mu.Lock()
	w := s.windows[k]
	if w == nil {
		w = &window{end: start.Add(length)}
		s.windows[k] = w
	}
	ok := w.local+w.others < limit
	if ok {
		w.local++
	}
	due := !s.syncing && now.Sub(s.lastSync) >= s.every
	if due {
		s.syncing, s.lastSync = true, now
	}
	s.mu.Unlock()
	if due {
		go s.syncInBackground(now)
	}
	if !ok {
		return false, w.end.Sub(now)
	}
	return true, 0
}

// syncInBackground syncs as of the call that found it due.
func (s *Shared) syncInBackground(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := s.Sync(ctx, now); err != nil && s.log != nil {
		s.log.Warn("sharing rate-limit counts", "err", err)
	}
}

// Sync forgets the windows that ended before now, adds what this
// instance counted in the others since it last said so to their shared
// rows, and reads back every instance's count.
func (s *Shared) Sync(ctx context.Context, now time.Time) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	s.syncing = true
	var p db.AddRatesParams
	var sent []*window
	for k, w := range s.windows {
		if !w.end.After(now) {
			delete(s.windows, k)
			continue
		}
		p.Buckets = append(p.Buckets, k.bucket)
		p.WindowStarts = append(p.WindowStarts, time.Unix(0, k.start).UTC())
		p.Deltas = append(p.Deltas, int32(w.local-w.told))
		p.ExpiresAts = append(p.ExpiresAts, w.end)
		sent = append(sent, w)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.syncing = false
		s.mu.Unlock()
	}()
	if len(sent) == 0 {
		return nil
	}
	rows, err := s.q.AddRates(ctx, p)
	if err != nil {
		return err
	}
	counts := make(map[windowKey]int, len(rows))
	for _, r := range rows {
		counts[windowKey{r.Bucket, r.WindowStart.UnixNano()}] = int(r.Count)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range sent {
		w.told += int(p.Deltas[i])
		if n, ok := counts[windowKey{p.Buckets[i], p.WindowStarts[i].UnixNano()}]; ok {
			w.others = max(n-w.told, 0)
		}
	}
	return nil
}
