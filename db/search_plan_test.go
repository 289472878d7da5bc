package db_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// records.search reads its matches through the trigram index, not every
// record of the workspace: with 20,000 records of which a handful match,
// the plan is a bitmap scan of records_text_trgm_idx (over the key and
// the value's text, migration 58), and no sequential scan of records.
func TestSearchRecords_UsesTheTrigramIndex(t *testing.T) {
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
	if !strings.Contains(text, "records_text_trgm_idx") {
		t.Errorf("the plan does not use records_text_trgm_idx:\n%s", text)
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

// records.search of one or two characters (too short for a trigram)
// walks records_key_prefix_idx in the order it returns and stops at the
// 50th match: with 20,000 records whose keys all start with the query,
// the plan is a limit over that index scan, with no sort (which would
// read every match first) and no sequential scan. Both plans are checked
// as PostgreSQL makes them for the first calls (the values known) and
// for the later ones (a prepared statement's generic plan, where a LIKE
// pattern could not be turned into a range).
func TestSearchByKeyPrefix_StopsAtTheLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO workspaces (slug, name) VALUES ('prefix-plan', 'prefix plan') RETURNING id`).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO records (workspace_id, collection, key, value)
		SELECT $1, 'clients', 'client-' || i, jsonb_build_object('name', 'Client ' || i)
		FROM generate_series(1, 20000) i`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO records (workspace_id, collection, key, value) VALUES
		($1, 'archive', 'cab', '{}'), ($1, 'archive', 'CAR', '{}'), ($1, 'archive', 'zed', '{}')`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE records`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct {
		name, sql  string
		args       []any
		collection bool
	}{
		{"SearchRecordsByKeyPrefix", db.SearchRecordsByKeyPrefixSQL, []any{ws, "c"}, false},
		{"SearchCollectionByKeyPrefix", db.SearchCollectionByKeyPrefixSQL, []any{ws, "clients", "cl"}, true},
	} {
		check := func(when, text string) {
			t.Helper()
			if !strings.Contains(text, "Index Scan using records_key_prefix_idx") {
				t.Errorf("%s, %s: the plan does not walk records_key_prefix_idx:\n%s", c.name, when, text)
			}
			if strings.Contains(text, "Seq Scan") || strings.Contains(text, "Sort") {
				t.Errorf("%s, %s: the plan reads every match before the limit:\n%s", c.name, when, text)
			}
			if c.collection && !strings.Contains(indexCond(text), "collection =") {
				t.Errorf("%s, %s: the collection is not checked in the index:\n%s", c.name, when, text)
			}
		}
		check("first calls", explain(t, ctx, conn.Conn(), c.sql, c.args...))
		check("generic plan", explainGeneric(t, ctx, conn.Conn(), c.sql, c.args...))
	}
	// And they find what they should, in key order.
	q := db.New(pool)
	all, err := q.SearchRecordsByKeyPrefix(ctx, db.SearchRecordsByKeyPrefixParams{WorkspaceID: ws, Prefix: "C"})
	if err != nil || len(all) != 50 || all[0].Key != "cab" || all[1].Key != "CAR" || all[2].Key != "client-1" {
		t.Fatalf("prefix C found %d records (%v), want 50 from cab, CAR, client-1", len(all), err)
	}
	archived, err := q.SearchCollectionByKeyPrefix(ctx, db.SearchCollectionByKeyPrefixParams{WorkspaceID: ws, Collection: "archive", Prefix: "ca"})
	if err != nil || len(archived) != 2 || archived[0].Key != "cab" || archived[1].Key != "CAR" {
		t.Fatalf("prefix ca in archive found %v (%v), want cab and CAR", archived, err)
	}
}

// indexCond is the plan's first "Index Cond:" line.
func indexCond(plan string) string {
	for line := range strings.Lines(plan) {
		if strings.HasPrefix(strings.TrimSpace(line), "Index Cond:") {
			return line
		}
	}
	return ""
}

// explainGeneric is the generic plan of sql prepared on conn: the plan a
// prepared statement may keep after its first five calls, made without
// the values of its parameters.
func explainGeneric(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	if _, err := conn.Exec(ctx, "PREPARE plan_under_test AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE plan_under_test")
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode")
	params := make([]string, len(args))
	for i := range args {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	// EXECUTE takes its values as literals: the simple protocol quotes them.
	return explain(t, ctx, conn, "EXECUTE plan_under_test("+strings.Join(params, ", ")+")",
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}

// explain is the plan PostgreSQL chooses for sql with args, one line per
// node.
func explain(t *testing.T, ctx context.Context, pool querier, sql string, args ...any) string {
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

// querier is a pool or one of its connections.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
