package rollup_test

import (
	"context"
	"testing"

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
	if _, err := shared.Exec(ctx, `WITH w AS (INSERT INTO workspaces (name, slug) VALUES ('w', 'w') RETURNING id)
		INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight)
		SELECT w.id, 'records.write', 'approved', 'receipt', 1, 1, 1 FROM w`); err != nil {
		t.Fatal(err)
	}
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
