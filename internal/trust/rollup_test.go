package trust

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func mustWorkspace(t *testing.T, pool *pgxpool.Pool, slug string) uuid.UUID {
	t.Helper()
	var ws uuid.UUID
	if err := pool.QueryRow(context.Background(), `INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

var (
	testClasses = []string{"draft.compose", "email.send.external", "tool.call.local"}
	testLabels  = slices.Sorted(func(yield func(Label) bool) {
		for l := range DecisionWeights {
			if !yield(l) {
				return
			}
		}
	})
	testProvenances = []Provenance{ProvenanceReceipt, ProvenancePrincipal, ProvenanceConnector, ProvenanceModelInferred}
)

// randomEvidence records n pieces of evidence in ws, through Record (what
// every outcome and explicit judgment writes).
func randomEvidence(t *testing.T, ctx context.Context, q *db.Queries, rng *rand.Rand, ws uuid.UUID, n int) {
	t.Helper()
	for range n {
		e := Evidence{WorkspaceID: ws, ActionClass: testClasses[rng.IntN(len(testClasses))], Label: testLabels[rng.IntN(len(testLabels))],
			Provenance: testProvenances[rng.IntN(len(testProvenances))]}
		if err := Record(ctx, q, e); err != nil {
			t.Fatal(err)
		}
	}
}

// directTotals sums every evidence row of ws, as the page once did.
func directTotals(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) map[string]classTotals {
	t.Helper()
	rows, err := pool.Query(ctx, `
		SELECT action_class,
		       coalesce(sum(weight::numeric) FILTER (WHERE weight > 0), 0)::float8, coalesce(sum(-weight::numeric) FILTER (WHERE weight < 0), 0)::float8,
		       count(*) FILTER (WHERE weight <> 0), count(*),
		       count(*) FILTER (WHERE provenance IN ('receipt', 'principal') AND label IN ('approved', 'minor_edit')),
		       count(*) FILTER (WHERE provenance IN ('receipt', 'principal') AND label IN ('approved', 'minor_edit', 'edited', 'heavy_rewrite', 'rejected')),
		       count(*) FILTER (WHERE label IN ('approved', 'sent')), count(*) FILTER (WHERE label IN ('minor_edit', 'edited', 'heavy_rewrite')),
		       count(*) FILTER (WHERE label IN ('rejected', 'dropped', 'violation'))
		FROM evidence WHERE workspace_id = $1 GROUP BY action_class`, ws)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]classTotals{}
	for rows.Next() {
		var c string
		var x classTotals
		if err := rows.Scan(&c, &x.Positive, &x.Negative, &x.Samples, &x.Rows, &x.JudgedApprovals, &x.Judgments, &x.Approvals, &x.Edits, &x.Rejections); err != nil {
			t.Fatal(err)
		}
		out[c] = x
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// And in floating point, the way the rows were once summed.
	var weights []struct {
		class string
		w     float64
	}
	fr, err := pool.Query(ctx, `SELECT action_class, weight FROM evidence WHERE workspace_id = $1`, ws)
	if err != nil {
		t.Fatal(err)
	}
	for fr.Next() {
		var c string
		var w float64
		if err := fr.Scan(&c, &w); err != nil {
			t.Fatal(err)
		}
		weights = append(weights, struct {
			class string
			w     float64
		}{c, w})
	}
	pos, neg := map[string]float64{}, map[string]float64{}
	for _, x := range weights {
		if x.w > 0 {
			pos[x.class] += x.w
		} else {
			neg[x.class] -= x.w
		}
	}
	for c, x := range out {
		if math.Abs(x.Positive-pos[c]) > 1e-9 || math.Abs(x.Negative-neg[c]) > 1e-9 {
			t.Fatalf("%s: numeric sums %v/%v, float sums %v/%v", c, x.Positive, x.Negative, pos[c], neg[c])
		}
	}
	return out
}

// readTotals reads ws's totals as the pages do: folded plus the tail.
func readTotals(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) map[string]classTotals {
	t.Helper()
	got, updating, err := evidenceTotals(ctx, db.New(pool), ws)
	if err != nil {
		t.Fatal(err)
	}
	if updating {
		t.Fatal("updating: the tail is longer than a read adds")
	}
	return got
}

func equalTotals(t *testing.T, when string, got, want map[string]classTotals) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d classes, want %d: %+v, want %+v", when, len(got), len(want), got, want)
	}
	for c, w := range want {
		if got[c] != w {
			t.Fatalf("%s: %s is %+v, want %+v", when, c, got[c], w)
		}
		// The posterior is the one every row gives, to the bit.
		g, d := ComputePosterior(c, got[c].tally(), ThresholdFor(c, nil), false), ComputePosterior(c, w.tally(), ThresholdFor(c, nil), false)
		if g != d {
			t.Fatalf("%s: %s posterior %+v, want %+v", when, c, g, d)
		}
	}
}

// advance takes turns on the evidence feed, with batches of batch rows,
// until the watermark reaches the head (or turns run out).
func advance(t *testing.T, ctx context.Context, pool *pgxpool.Pool, batch int32, turns int) {
	t.Helper()
	for range turns {
		if _, err := rollup.Advance(ctx, pool, evidenceFeed(batch)); err != nil {
			t.Fatal(err)
		}
	}
}

func feedState(t *testing.T, ctx context.Context, pool *pgxpool.Pool) db.RollupFeed {
	t.Helper()
	f, err := db.New(pool).GetRollupFeed(ctx, EvidenceFeed)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// caughtUp runs the roll-up until it has folded every row.
func caughtUp(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	for range 1000 {
		head, err := db.New(pool).EvidenceHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if feedState(t, ctx, pool).FoldedTo == head {
			return
		}
		advance(t, ctx, pool, evidenceFoldBatch, 1)
	}
	t.Fatal("the roll-up does not catch up")
}

// The posterior read from the totals plus the unfolded tail is the one
// computed from every row, whatever batches the roll-up folded them in and
// wherever it stands: random evidence in two workspaces, folded a random
// number of turns with random batch sizes between rounds.
func TestEvidenceTotals_EqualEveryRowWhateverTheBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	q := db.New(pool)
	wss := []uuid.UUID{mustWorkspace(t, pool, "totals-a"), mustWorkspace(t, pool, "totals-b")}
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 30))
		for round := range 6 {
			for _, ws := range wss {
				randomEvidence(t, ctx, q, rng, ws, rng.IntN(40))
			}
			advance(t, ctx, pool, int32(1+rng.IntN(30)), rng.IntN(4))
			for i, ws := range wss {
				equalTotals(t, fmt.Sprintf("seed %d round %d workspace %d (watermark %d)", seed, round, i, feedState(t, ctx, pool).FoldedTo),
					readTotals(t, ctx, pool, ws), directTotals(t, ctx, pool, ws))
			}
		}
	}
	caughtUp(t, ctx, pool)
	for _, ws := range wss {
		var tail int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM evidence WHERE workspace_id = $1 AND id > (SELECT folded_to FROM rollup_feeds WHERE feed = 'evidence')`, ws).Scan(&tail); err != nil || tail != 0 {
			t.Fatalf("after catching up, %d rows are left unfolded (%v)", tail, err)
		}
		equalTotals(t, "caught up", readTotals(t, ctx, pool, ws), directTotals(t, ctx, pool, ws))
	}
	// Idempotent: more turns with nothing new change nothing.
	before := readTotals(t, ctx, pool, wss[0])
	advance(t, ctx, pool, 7, 5)
	equalTotals(t, "more turns", readTotals(t, ctx, pool, wss[0]), before)
}

// A row whose transaction commits after a larger id is visible is not
// skipped: the roll-up does not fold past it while that transaction is
// open, and folds it once it commits.
func TestEvidenceRollUp_WaitsForATransactionThatCommitsLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "late-commit")
	rec := func(q *db.Queries) {
		if err := Record(ctx, q, Evidence{WorkspaceID: ws, ActionClass: "draft.compose", Label: LabelApproved, Provenance: ProvenancePrincipal}); err != nil {
			t.Fatal(err)
		}
	}
	rec(db.New(pool))
	caughtUp(t, ctx, pool)

	late, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	rec(db.New(late)) // draws the smaller id, commits last
	var lateID int64
	if err := late.QueryRow(ctx, `SELECT max(id) FROM evidence`).Scan(&lateID); err != nil {
		t.Fatal(err)
	}
	rec(db.New(pool)) // a larger id, committed at once
	advance(t, ctx, pool, evidenceFoldBatch, 5)
	if f := feedState(t, ctx, pool); f.FoldedTo >= lateID {
		t.Fatalf("folded to %d past %d, whose transaction is still open", f.FoldedTo, lateID)
	}
	equalTotals(t, "while one is open", readTotals(t, ctx, pool, ws), directTotals(t, ctx, pool, ws))

	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, ctx, pool)
	got := readTotals(t, ctx, pool, ws)
	equalTotals(t, "after it commits", got, directTotals(t, ctx, pool, ws))
	var folded int64
	if err := pool.QueryRow(ctx, `SELECT rows FROM evidence_totals WHERE workspace_id = $1 AND action_class = 'draft.compose'`, ws).Scan(&folded); err != nil || folded != 3 {
		t.Fatalf("%d rows folded (%v), want all 3", folded, err)
	}
}

// Two workers (two instances) take turns while calls write evidence in
// transactions that commit out of order: each row is folded exactly once.
func TestEvidenceRollUp_TwoWorkersFoldEachRowOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "two-workers")
	var writers, workers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 4))
			for range 15 {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					randomEvidence(t, ctx, db.New(tx), rng, ws, 1+rng.IntN(3))
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	for w := range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := rollup.Advance(ctx, pool, evidenceFeed(int32(1+rng.IntN(10)))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(done)
	workers.Wait()
	caughtUp(t, ctx, pool)
	equalTotals(t, "after both", readTotals(t, ctx, pool, ws), directTotals(t, ctx, pool, ws))
	var folded, rows int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT sum(rows) FROM evidence_totals WHERE workspace_id = $1), (SELECT count(*) FROM evidence WHERE workspace_id = $1)`, ws).
		Scan(&folded, &rows); err != nil || folded != rows {
		t.Fatalf("%d rows folded of %d (%v)", folded, rows, err)
	}
}

// The roll-up's safety rests on each backend drawing ids one at a time
// (internal/rollup): the evidence and audit_events sequences cache none.
func TestRollUp_FeedSequencesCacheNoIDs(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	for _, table := range []string{"evidence", "audit_events"} {
		var cache int64
		if err := pool.QueryRow(context.Background(), `SELECT s.cache_size FROM pg_sequences s WHERE format('%I.%I', s.schemaname, s.sequencename)::regclass = pg_get_serial_sequence($1, 'id')::regclass`, table).
			Scan(&cache); err != nil || cache != 1 {
			t.Errorf("%s's id sequence caches %d ids (%v), want 1", table, cache, err)
		}
	}
}
