package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// records.search reads its matches through the trigram indexes, not every
// record of the workspace: with 20,000 records of which a handful match,
// the plan is a bitmap scan of records_key_trgm_idx and
// records_value_trgm_idx, and no sequential scan of records.
func TestSearchRecords_UsesTheTrigramIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO workspaces (slug, name) VALUES ('search-plan', 'search plan') RETURNING id`).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO records (workspace_id, collection, key, value)
		SELECT $1, 'clients', 'client-' || i, jsonb_build_object('name', 'Client ' || i, 'city', 'Lyon')
		FROM generate_series(1, 20000) i`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO records (workspace_id, collection, key, value) VALUES ($1, 'clients', 'acme', '{"name": "ACME Corp"}')`, ws); err != nil {
		t.Fatal(err)
	}
	// As autovacuum leaves it: statistics, and the GIN pending lists merged.
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE records`); err != nil {
		t.Fatal(err)
	}
	text := explain(t, ctx, pool, db.SearchRecordsSQL, ws, "clients", "acme")
	for _, want := range []string{"records_key_trgm_idx", "records_value_trgm_idx"} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan does not use %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Seq Scan on records") {
		t.Errorf("the plan reads every record:\n%s", text)
	}
	// And it finds the match.
	found, err := db.New(pool).SearchRecords(ctx, db.SearchRecordsParams{WorkspaceID: ws, Query: "acme"})
	if err != nil || len(found) != 1 || found[0].Key != "acme" {
		t.Fatalf("search found %v (%v), want the one record acme", found, err)
	}
}

// explain is the plan PostgreSQL chooses for sql with args, one line per
// node.
func explain(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	rows, err := pool.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
