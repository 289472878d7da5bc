package rollup_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// A feed's turn plans its statements generically when the feed asks for
// it, and as the server's own plan_cache_mode says otherwise; the setting
// ends with the turn's transaction. Seen on the turn's connection (a pool
// of one): its prepared fold statement's generic and custom plans.
func TestAdvance_GenericPlansForTheTurnOnlyWhenTheFeedAsks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	shared := dbtest.MustPool(t)
	evidenceRow(t, shared, workspace(t, shared))
	var jitBefore string
	if err := shared.QueryRow(ctx, "SELECT current_setting('jit')").Scan(&jitBefore); err != nil {
		t.Fatal(err)
	}
	for _, generic := range []bool{true, false} {
		if _, err := shared.Exec(ctx, `UPDATE rollup_feeds SET folded_to = 0, next_to = 0, next_writers = '{}' WHERE feed = 'evidence'`); err != nil {
			t.Fatal(err)
		}
		cfg := shared.Config()
		cfg.MaxConns, cfg.MinConns = 1, 0
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		folded := 0
		f := rollup.Feed{Name: "evidence", GenericPlans: generic,
			Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.EvidenceHead(ctx) },
			Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
				folded++
				_, err := q.FoldEvidence(ctx, db.FoldEvidenceParams{After: after, Upto: upto})
				return upto, err
			},
		}
		for range 3 {
			if _, err := rollup.Advance(ctx, pool, f); err != nil {
				t.Fatal(err)
			}
		}
		var genericPlans, customPlans int64
		var mode, jit string
		if err := pool.QueryRow(ctx, `SELECT generic_plans, custom_plans, current_setting('plan_cache_mode'), current_setting('jit')
			FROM pg_prepared_statements WHERE statement LIKE '-- name: FoldEvidence %'`).Scan(&genericPlans, &customPlans, &mode, &jit); err != nil {
			t.Fatal(err)
		}
		if folded != 1 {
			t.Fatalf("generic plans %v: folded %d times, want once", generic, folded)
		}
		if want := map[bool][2]int64{true: {1, 0}, false: {0, 1}}[generic]; [2]int64{genericPlans, customPlans} != want {
			t.Errorf("generic plans %v: the fold was planned %d generic, %d custom; want %v", generic, genericPlans, customPlans, want)
		}
		if mode != "auto" || jit != jitBefore {
			t.Errorf("generic plans %v: plan_cache_mode %q and jit %q after the turn, want auto and %q", generic, mode, jit, jitBefore)
		}
	}
}

// evidenceRow inserts one evidence row in ws through q and returns its id.
func evidenceRow(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, ws string) int64 {
	t.Helper()
	var id int64
	if err := q.QueryRow(t.Context(), `INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight)
		VALUES ($1, 'records.write', 'approved', 'receipt', 1, 1, 1) RETURNING id`, ws).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// twoFeeds are two feeds of the evidence table (under two of
// rollup_feeds' names), each counting its reads of the head and noting
// what it folded.
type twoFeeds struct {
	heads  [2]int
	folded [2][]int64 // each fold's upto
}

func (f *twoFeeds) feed(i int) rollup.Feed {
	return rollup.Feed{Name: []string{"notifications", "shadow_rules"}[i], Tables: []string{"evidence"},
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { f.heads[i]++; return q.EvidenceHead(ctx) },
		Fold: func(_ context.Context, _ *db.Queries, _, upto int64) (int64, error) {
			f.folded[i] = append(f.folded[i], upto)
			return upto, nil
		},
	}
}

func workspace(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var ws string
	if err := pool.QueryRow(t.Context(), `INSERT INTO workspaces (name, slug) VALUES ('w', 'w') RETURNING id::text`).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

// Feeds of one table in one process read the table's head and writers
// once between them: the second feed's turn takes the candidate the first
// one read a moment ago.
func TestAdvance_FeedsOfOneTableShareACandidate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.MustPool(t)
	ws := workspace(t, pool)
	last := evidenceRow(t, pool, ws)
	var f twoFeeds
	for i := range 2 {
		if _, err := rollup.Advance(ctx, pool, f.feed(i)); err != nil {
			t.Fatal(err)
		}
	}
	if f.heads != [2]int{1, 0} {
		t.Errorf("reads of the head: %v, want the first feed's only", f.heads)
	}
	rows, err := pool.Query(ctx, `SELECT next_to FROM rollup_feeds WHERE feed IN ('notifications', 'shadow_rules') ORDER BY feed`)
	if err != nil {
		t.Fatal(err)
	}
	next, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 2 || next[0] != last || next[1] != last {
		t.Errorf("candidates %v, want both %d", next, last)
	}
}

// A candidate one feed took from another still waits for the transactions
// that were writing when it was read: a row whose transaction commits late
// is folded by both feeds, after it commits, never skipped.
func TestAdvance_ASharedCandidateWaitsForItsWriters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.MustPool(t)
	ws := workspace(t, pool)
	late, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	lateID := evidenceRow(t, late, ws)
	last := evidenceRow(t, pool, ws)
	var f twoFeeds
	turns := func() {
		for i := range 2 {
			if _, err := rollup.Advance(ctx, pool, f.feed(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 {
		turns()
		time.Sleep(60 * time.Millisecond) // past what the feeds share
	}
	if f.heads[1] != 0 {
		t.Fatalf("the second feed read the head itself (%d times): the candidate was not shared", f.heads[1])
	}
	for i := range 2 {
		if len(f.folded[i]) > 0 {
			t.Fatalf("feed %d folded up to %v while the row %d was uncommitted", i, f.folded[i], lateID)
		}
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	turns()
	for i := range 2 {
		if len(f.folded[i]) != 1 || f.folded[i][0] != last {
			t.Errorf("feed %d folded up to %v after the late row committed, want [%d]", i, f.folded[i], last)
		}
	}
}
