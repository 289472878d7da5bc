package audit_test

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db" // registers pgx5:// for golang-migrate
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/migrations"
)

const partitionsVersion = 37

// before37 is the migration before 37: the schema audit_events is
// partitioned from.
func before37(t *testing.T) uint {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	var prev uint
	for _, n := range names {
		v, err := strconv.ParseUint(n[:6], 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		if v < partitionsVersion && uint(v) > prev {
			prev = uint(v)
		}
	}
	return prev
}

// auditSchema describes audit_events as a client and an operator see it:
// its kind, columns (type, nullability, default, identity, compression),
// indexes, constraints and identity sequence.
func auditSchema(t *testing.T, ctx context.Context, pool *pgxpool.Pool) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT relkind::text FROM pg_class WHERE oid = 'audit_events'::regclass`,
		`SELECT format('%s %s %s %s %s %s', a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
		               coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity::text || '/' || a.attcompression::text)
		 FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		 WHERE a.attrelid = 'audit_events'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
		`SELECT indexdef FROM pg_indexes WHERE tablename = 'audit_events' ORDER BY indexname`,
		`SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'audit_events'::regclass ORDER BY conname`,
		`SELECT format('%s %s %s %s %s %s', s.sequencename, s.start_value, s.increment_by, s.max_value, s.cache_size, s.cycle)
		 FROM pg_sequences s WHERE format('%I.%I', s.schemaname, s.sequencename)::regclass = pg_get_serial_sequence('audit_events', 'id')::regclass`,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// auditRows is every audit row, whole, in id order.
func auditRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool) (string, int) {
	t.Helper()
	var digest string
	var n int
	if err := pool.QueryRow(ctx, `SELECT coalesce(md5(string_agg(to_jsonb(a)::text, ',' ORDER BY id)), ''), count(*) FROM audit_events a`).Scan(&digest, &n); err != nil {
		t.Fatal(err)
	}
	return digest, n
}

// nextID is the id the next audit row gets, drawn and rolled back.
func nextID(t *testing.T, ctx context.Context, pool *pgxpool.Pool) int64 {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id)
		SELECT id, 'system', 'test.next', 'test', 'next' FROM workspaces LIMIT 1 RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Migration 37 moves every audit row into the partitioned table, and its
// down migration moves them back into a plain table identical to the one
// before (columns, indexes, identity), rows in the default partition
// too; up again, they are all there. The identity goes on from where it
// was, past ids drawn and rolled back, every way.
func TestPartitionsMigration_UpDownUpKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.MustURL(t)
	pool, err := db.NewPool(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// An empty database, migrated by golang-migrate to each version.
	if _, err := pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, regexp.MustCompile(`^postgres(ql)?://`).ReplaceAllString(url, "pgx5://"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	to := func(v uint) {
		t.Helper()
		if err := m.Migrate(v); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			t.Fatalf("migrate to %d: %v", v, err)
		}
		pool.Reset() // statements prepared on the table before
	}
	prev := before37(t)
	to(prev)
	plain := auditSchema(t, ctx, pool)
	if !strings.HasPrefix(plain, "r\n") {
		t.Fatalf("before 37, audit_events is not a plain table:\n%s", plain)
	}
	// Rows of months past, present and far ahead, of several workspaces,
	// and ids drawn and rolled back at the end.
	if _, err := pool.Exec(ctx, `
		WITH ws AS (INSERT INTO workspaces (slug, name) SELECT 'w' || i, 'W' || i FROM generate_series(1, 3) i RETURNING id)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at, retention_until)
		SELECT ws.id, 'system', 'test.moved', 'test', 'row' || i, jsonb_build_object('i', i, 'scope_id', 'c' || (i % 7)),
		       now() - i * interval '9 hours', now() - interval '400 days' + i * interval '5 days'
		FROM ws, generate_series(1, 300) i`); err != nil {
		t.Fatal(err)
	}
	nextID(t, ctx, pool)
	nextID(t, ctx, pool)
	rows, n := auditRows(t, ctx, pool)
	next := nextID(t, ctx, pool)

	to(partitionsVersion)
	if s := auditSchema(t, ctx, pool); !strings.HasPrefix(s, "p\n") {
		t.Fatalf("after 37, audit_events is not partitioned:\n%s", s)
	}
	if got, _ := auditRows(t, ctx, pool); got != rows {
		t.Fatal("the rows differ after the migration up")
	}
	var inDefault, hoursOff int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events_short_default) + (SELECT count(*) FROM audit_events_long_default)`).Scan(&inDefault); err != nil || inDefault != 0 {
		t.Fatalf("%d rows in the default partition (%v): every month should have its partition", inDefault, err)
	}
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			(SELECT workspace_id, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS hour, min(id), max(id) FROM audit_events GROUP BY 1, 2
			 EXCEPT SELECT workspace_id, hour, min_id, max_id FROM audit_hours)
			UNION ALL
			(SELECT workspace_id, hour, min_id, max_id FROM audit_hours
			 EXCEPT SELECT workspace_id, date_trunc('hour', created_at AT TIME ZONE 'UTC'), min(id), max(id) FROM audit_events GROUP BY 1, 2)) x`).
		Scan(&hoursOff); err != nil || hoursOff != 0 {
		t.Fatalf("%d hours' id ranges differ from the rows' (%v)", hoursOff, err)
	}
	if got := nextID(t, ctx, pool); got <= next {
		t.Fatalf("after up, the next id is %d, want more than %d", got, next)
	}

	// A row in a partition, one in the default partition.
	if _, err := pool.Exec(ctx, `
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, retention_until)
		SELECT id, 'system', 'test.partitioned', 'test', x.name, x.until FROM workspaces,
		       (VALUES ('partition', now() + interval '30 days'), ('default', now() + interval '80 years')) AS x (name, until)
		WHERE slug = 'w1'`); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events_short_default) + (SELECT count(*) FROM audit_events_long_default)`).Scan(&inDefault); err != nil || inDefault != 1 {
		t.Fatalf("%d rows in the default partition (%v), want 1", inDefault, err)
	}
	rows, n2 := auditRows(t, ctx, pool)
	if n2 != n+2 {
		t.Fatalf("%d rows, want %d", n2, n+2)
	}
	next = nextID(t, ctx, pool)

	to(prev)
	if s := auditSchema(t, ctx, pool); s != plain {
		t.Fatalf("after down, audit_events is\n%s\nwant, as before 37,\n%s", s, plain)
	}
	if got, _ := auditRows(t, ctx, pool); got != rows {
		t.Fatal("the rows differ after the migration down")
	}
	if got := nextID(t, ctx, pool); got <= next {
		t.Fatalf("after down, the next id is %d, want more than %d", got, next)
	}
	next = nextID(t, ctx, pool)

	to(partitionsVersion)
	if got, _ := auditRows(t, ctx, pool); got != rows {
		t.Fatal("the rows differ after the migration up again")
	}
	if got := nextID(t, ctx, pool); got <= next {
		t.Fatalf("after up again, the next id is %d, want more than %d", got, next)
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		t.Fatalf("the migrations after 37: %v", err)
	}
}
