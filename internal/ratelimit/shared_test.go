package ratelimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/ratelimit"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var t0 = time.Date(2026, 11, 27, 12, 0, 10, 0, time.UTC)

// One instance is exact: the limit's calls pass, the next is refused
// with the time left in the window, a refused call is not counted, and
// the next window starts empty.
func TestShared_OneInstanceIsExact(t *testing.T) {
	t.Parallel()
	s := ratelimit.New(db.New(dbtest.MustPool(t)), nil)
	for i := range 3 {
		if ok, _ := s.Take("agent:a:records.get", 3, time.Minute, t0.Add(time.Duration(i)*time.Millisecond)); !ok {
			t.Fatalf("call %d refused under the limit", i+1)
		}
	}
	for range 2 {
		ok, retry := s.Take("agent:a:records.get", 3, time.Minute, t0.Add(5*time.Second))
		if ok || retry != 45*time.Second {
			t.Fatalf("over the limit: ok %v, retry after %v (want refused, 45s)", ok, retry)
		}
	}
	if ok, _ := s.Take("agent:b:records.get", 3, time.Minute, t0); !ok {
		t.Fatal("another bucket shares the count")
	}
	if ok, _ := s.Take("agent:a:records.get", 3, time.Minute, t0.Add(time.Minute)); !ok {
		t.Fatal("the next window is not empty")
	}
}

// Two instances share their counts through the database: each learns
// what the other counted at its next sync, and the refusals that follow
// count nothing.
func TestShared_InstancesShareTheirCounts(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	a, b := ratelimit.New(db.New(pool), nil), ratelimit.New(db.New(pool), nil)
	const bucket, limit = "agent:token:x:records.put", 5
	for range 3 {
		if ok, _ := a.Take(bucket, limit, time.Minute, t0); !ok {
			t.Fatal("a refused under the limit")
		}
	}
	for range 2 {
		if ok, _ := b.Take(bucket, limit, time.Minute, t0); !ok {
			t.Fatal("b refused under the limit")
		}
	}
	for _, s := range []*ratelimit.Shared{a, b, a} {
		if err := s.Sync(t.Context(), t0); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := a.Take(bucket, limit, time.Minute, t0); ok {
		t.Error("a admitted a sixth call after learning b's two")
	}
	if ok, _ := b.Take(bucket, limit, time.Minute, t0); ok {
		t.Error("b admitted a sixth call after learning a's three")
	}
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count FROM rate_counters WHERE bucket = $1", bucket).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != limit {
		t.Errorf("shared count %d, want %d (each call told once, refusals not at all)", n, limit)
	}
	// A sync with nothing new tells nothing twice.
	if err := a.Sync(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(), "SELECT count FROM rate_counters WHERE bucket = $1", bucket).Scan(&n); err != nil || n != limit {
		t.Errorf("after another sync: %d, %v", n, err)
	}
	// Windows that ended are forgotten.
	if err := a.Sync(t.Context(), t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.Take(bucket, limit, time.Minute, t0.Add(2*time.Minute)); !ok {
		t.Error("a new window refused")
	}
}

// Calls and syncs at once (run with -race): every admitted call is told
// exactly once.
func TestShared_ConcurrentTakesAndSyncs(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	s := ratelimit.New(db.New(pool), nil)
	const bucket, limit = "agent:token:y:records.get", 1000
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if ok, _ := s.Take(bucket, limit, time.Hour, now); ok {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := s.Sync(t.Context(), now); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if err := s.Sync(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if admitted != limit {
		t.Errorf("admitted %d of 1600 calls, want the limit %d", admitted, limit)
	}
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count FROM rate_counters WHERE bucket = $1", bucket).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != limit {
		t.Errorf("shared count %d, want %d", n, limit)
	}
}
