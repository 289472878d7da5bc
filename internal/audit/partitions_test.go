package audit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const day = 24 * time.Hour

// The retention classes (internal/tools) and a tool's own.
var retentions = []time.Duration{30 * day, 365 * day, 7 * 365 * day, 10 * 365 * day, 90 * day}

func utcMonth(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }
func utcYear(y int) time.Time                { return utcMonth(y, 1) }

func short(first time.Time) audit.Period { return audit.Period{Band: audit.BandShort, First: first} }
func long(first time.Time) audit.Period  { return audit.Period{Band: audit.BandLong, First: first} }

func TestPeriodsAhead_ThePeriodsThisAndTheNextTwoMonthsWritesExpireIn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		now  time.Time
		keep []time.Duration
		want []audit.Period
	}{
		{"30 days from late November", time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC), []time.Duration{30 * day},
			[]audit.Period{short(utcMonth(2026, 12)), short(utcMonth(2027, 1)), short(utcMonth(2027, 2)), short(utcMonth(2027, 3))}},
		{"365 days from the first instant of a month", utcMonth(2027, 3), []time.Duration{365 * day},
			[]audit.Period{short(utcMonth(2028, 2)), short(utcMonth(2028, 3)), short(utcMonth(2028, 4)), short(utcMonth(2028, 5))}},
		{"an hour from the last instant of a year", time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), []time.Duration{time.Hour},
			[]audit.Period{short(utcMonth(2026, 12)), short(utcMonth(2027, 1)), short(utcMonth(2027, 2)), short(utcMonth(2027, 3))}},
		{"7 and 10 years from November: years", time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), []time.Duration{7 * 365 * day, 10 * 365 * day},
			[]audit.Period{long(utcYear(2033)), long(utcYear(2034)), long(utcYear(2036)), long(utcYear(2037))}},
		{"two years exactly is short, a day more long", time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC), []time.Duration{730 * day, 731 * day},
			[]audit.Period{short(utcMonth(2028, 4)), short(utcMonth(2028, 5)), short(utcMonth(2028, 6)), short(utcMonth(2028, 7)), long(utcYear(2028))}},
		{"no retention", time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), []time.Duration{0}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := audit.PeriodsAhead(c.now, c.keep); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// Whenever a row is written from the start of this month to the end of
// the month after next, whatever its retention among those ensured, the
// period it expires in is among PeriodsAhead's.
func TestPeriodsAhead_CoverEveryWriteOfTheThreeMonths(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 3))
	for range 500 {
		now := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(20 * 365 * day))))
		keep := time.Duration(1+rng.Int64N(int64(11*365*day))) / time.Second * time.Second
		periods := audit.PeriodsAhead(now, []time.Duration{keep})
		from := utcMonth(now.Year(), now.Month())
		at := from.Add(time.Duration(rng.Int64N(int64(from.AddDate(0, 3, 0).Sub(from)))))
		p := audit.PeriodOf(audit.BandOf(keep), at.Add(keep))
		if !slices.Contains(periods, p) {
			t.Fatalf("now %s, kept %s: a row written at %s expires in %v, not in %v", now, keep, at, p, periods)
		}
		if exp := at.Add(keep); exp.Before(p.First) || !exp.Before(p.End()) {
			t.Fatalf("%s is not in its period %v", exp, p)
		}
	}
}

// fixture is a workspace of its own.
func newWorkspace(t *testing.T, ctx context.Context, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO workspaces (slug, name) VALUES ($1, 'audit') RETURNING id`, "audit-"+uuid.NewString()[:8]).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

// insertExpiring writes one audit row per retention_until given, created
// now (so kept from now until then), named by subject_id, and returns
// their ids.
func insertExpiring(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID, name string, until ...time.Time) []int64 {
	t.Helper()
	return insertKept(t, ctx, pool, ws, name, 0, until...)
}

// insertKept writes one audit row per retention_until given, created
// keep before it (0: now), named by subject_id, and returns their ids.
func insertKept(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID, name string, keep time.Duration, until ...time.Time) []int64 {
	t.Helper()
	rows, err := pool.Query(ctx, `
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, created_at, retention_until)
		SELECT $1, 'system', 'test.kept', 'test', $2 || '-' || u.n,
		       CASE WHEN $4::bigint = 0 THEN now() ELSE u.until - $4::bigint * interval '1 microsecond' END, u.until
		FROM unnest($3::timestamptz[]) WITH ORDINALITY AS u (until, n)
		RETURNING id`, ws, name, until, keep.Microseconds())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// partitions is every monthly partition of audit_events: its name and
// whether it is attached.
func partitions(t *testing.T, ctx context.Context, pool *pgxpool.Pool) map[string]bool {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT relname::text, relispartition FROM pg_class WHERE relkind = 'r' AND relname ~ '^audit_events_(m[0-9]{6}|y[0-9]{4})$'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var name string
	var attached bool
	if _, err := pgx.ForEachRow(rows, []any{&name, &attached}, func() error { out[name] = attached; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// leaf is the name of a period's partition.
func leaf(p audit.Period) string {
	if p.Band == audit.BandLong {
		return "audit_events_y" + p.First.Format("2006")
	}
	return "audit_events_m" + p.First.Format("200601")
}

// where is the partition that holds each row, by id.
func where(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ids []int64) map[int64]string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT id, tableoid::regclass::text FROM audit_events WHERE id = ANY ($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	var id int64
	var part string
	if _, err := pgx.ForEachRow(rows, []any{&id, &part}, func() error { out[id] = part; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Several instances start at once: each period's partition is created
// once, attached, with its indexes named after the parent's, and the rows
// written after go into it, not into a default partition. Doing it again
// creates nothing.
func TestEnsurePartitions_CreatesThePeriodsAheadOnceWhateverTheInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	now := time.Now()
	want := audit.PeriodsAhead(now, append([]time.Duration{audit.DefaultRetention}, retentions...))
	before := partitions(t, ctx, pool)
	missing := 0
	for _, p := range want {
		if _, ok := before[leaf(p)]; !ok {
			missing++
		}
	}
	if missing == 0 {
		t.Fatal("the migration made every partition ahead already: the custom retention should need some")
	}

	var wg sync.WaitGroup
	created := make([]int, 4)
	errs := make([]error, 4)
	for i := range created {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[i], errs[i] = audit.EnsurePartitions(ctx, pool, now, retentions)
		}()
	}
	wg.Wait()
	total := 0
	for i := range created {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		total += created[i]
	}
	if total != missing {
		t.Fatalf("the instances created %d partitions, want the %d missing", total, missing)
	}
	after := partitions(t, ctx, pool)
	for _, p := range want {
		name := leaf(p)
		if !after[name] {
			t.Fatalf("%s is not an attached partition: %v", name, after)
		}
		suffix := name[len("audit_events_"):]
		var indexes int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexname = ANY ($2)`, name,
			[]string{"audit_events_pkey_" + suffix, "audit_events_object_idx_" + suffix, "audit_events_action_idx_" + suffix, "audit_events_scope_idx_" + suffix}).
			Scan(&indexes); err != nil || indexes != 4 {
			t.Fatalf("%s has %d of its indexes under their parents' names (%v)", name, indexes, err)
		}
	}
	if n, err := audit.EnsurePartitions(ctx, pool, now, retentions); err != nil || n != 0 {
		t.Fatalf("again: created %d (%v), want 0", n, err)
	}

	ws := newWorkspace(t, ctx, pool)
	var until []time.Time
	for _, keep := range retentions {
		until = append(until, now.Add(keep))
	}
	ids := insertExpiring(t, ctx, pool, ws, "ahead", until...)
	parts := where(t, ctx, pool, ids)
	for i, id := range ids {
		if want := leaf(audit.PeriodOf(audit.BandOf(retentions[i]), until[i])); parts[id] != want {
			t.Errorf("a row kept %s is in %s, want %s", retentions[i], parts[id], want)
		}
	}
}

// Rows whose period had no partition wait in their band's default
// partition; the next maintenance moves them into their period's
// partition, as they were.
func TestEnsurePartitions_MovesTheDefaultPartitionsRowsIntoTheirPeriods(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	ws := newWorkspace(t, ctx, pool)
	far := time.Now().AddDate(60, 0, 0)
	past := time.Now().AddDate(-3, 0, 0)
	until := []time.Time{far, far.Add(time.Hour), past}
	ids := insertExpiring(t, ctx, pool, ws, "waiting", until...)
	periods := []audit.Period{audit.PeriodOf(audit.BandLong, far), audit.PeriodOf(audit.BandLong, far.Add(time.Hour)), audit.PeriodOf(audit.BandShort, past)}
	digest := func() string {
		var d string
		if err := pool.QueryRow(ctx, `SELECT md5(string_agg(to_jsonb(a)::text, ',' ORDER BY id)) FROM audit_events a WHERE id = ANY ($1)`, ids).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	was := digest()
	for i, id := range ids {
		if part, want := where(t, ctx, pool, ids)[id], "audit_events_"+periods[i].Band+"_default"; part != want {
			t.Fatalf("row %d went to %s before its period had a partition, want %s", id, part, want)
		}
	}
	if _, err := audit.EnsurePartitions(ctx, pool, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	parts := where(t, ctx, pool, ids)
	for i, id := range ids {
		if want := leaf(periods[i]); parts[id] != want {
			t.Errorf("row %d is in %s, want %s", id, parts[id], want)
		}
	}
	if digest() != was {
		t.Fatal("the rows changed as they moved")
	}
	// The planner knows of the moved rows at once, not when autovacuum
	// gets to their partition.
	for _, p := range periods {
		var analyzed bool
		if err := pool.QueryRow(ctx, `SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = $1`, leaf(p)).Scan(&analyzed); err != nil || !analyzed {
			t.Errorf("%s was not analyzed when it was made (%v)", leaf(p), err)
		}
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events_short_default) + (SELECT count(*) FROM audit_events_long_default)`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows left in the default partitions (%v)", left, err)
	}
}

// Purge drops exactly the partitions whose period is over, with their
// rows: short months attached, one left detached by a purge that stopped
// half-way, the month of rows still in the short default partition, and
// a long year. Every row kept until now or later stays, whichever
// partition it is in (this month's and this year's hold rows past their
// retention too: they wait for their period to end). No row goes before
// its retention_until.
func TestPurge_DropsOnlyPartitionsWhoseEveryRowIsPastItsRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	ws := newWorkspace(t, ctx, pool)
	now := time.Now().UTC()
	this := utcMonth(now.Year(), now.Month())
	month := func(n int) time.Time { return this.AddDate(0, n, 0) }
	thisYear, lastYear := utcYear(now.Year()), utcYear(now.Year()-1)
	ensure := func(p audit.Period) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT gatehouse_audit_partition($1, $2::date)`, p.Band, p.First); err != nil {
			t.Fatal(err)
		}
	}
	// Short months -14 (to be left detached), -3, -1 and this one; month -6
	// has none: its rows wait in the default partition. Long years: last
	// year's and this one.
	for _, n := range []int{-14, -3, -1, 0} {
		ensure(short(month(n)))
	}
	ensure(long(lastYear))
	ensure(long(thisYear))
	rng := rand.New(rand.NewPCG(1, 2))
	within := func(p audit.Period, n int) []time.Time {
		var out []time.Time
		for range n {
			out = append(out, p.First.Add(time.Duration(rng.Int64N(int64(p.End().Sub(p.First))))))
		}
		return out
	}
	expired := map[string]int{}
	for _, n := range []int{-14, -6, -3, -1} {
		ids := insertExpiring(t, ctx, pool, ws, fmt.Sprintf("month%d", n), within(short(month(n)), 20+n)...)
		expired[leaf(short(month(n)))] = len(ids)
	}
	// Kept ten years, expired last year.
	ids := insertKept(t, ctx, pool, ws, "last-year", 10*365*day, within(long(lastYear), 9)...)
	expired[leaf(long(lastYear))] = len(ids)
	// This month: some rows already past their retention, some not; this
	// year's long rows, past or not; the months ahead; and a row decades
	// ahead in the long default partition.
	insertExpiring(t, ctx, pool, ws, "this-month-past", this, now.Add(-time.Minute))
	insertExpiring(t, ctx, pool, ws, "this-month-kept", now.Add(time.Minute))
	insertKept(t, ctx, pool, ws, "this-year", 7*365*day, thisYear, now.Add(-time.Minute), now.Add(time.Minute))
	insertExpiring(t, ctx, pool, ws, "ahead", within(short(month(1)), 5)...)
	insertExpiring(t, ctx, pool, ws, "decades", now.AddDate(40, 0, 0))
	if _, err := pool.Exec(ctx, `ALTER TABLE audit_events_short DETACH PARTITION `+leaf(short(month(-14)))); err != nil {
		t.Fatal(err)
	}
	type row struct {
		name  string
		until time.Time
	}
	read := func() map[int64]row {
		rows, err := pool.Query(ctx, `SELECT id, subject_id, retention_until FROM audit_events WHERE workspace_id = $1`, ws)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]row{}
		var id int64
		var r row
		if _, err := pgx.ForEachRow(rows, []any{&id, &r.name, &r.until}, func() error { out[id] = r; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := read()
	// The periods over: those above, the default partition's month, and
	// any partition ahead the migration made that is over by now (an old
	// test template).
	wantPartitions := 1
	for name := range partitions(t, ctx, pool) {
		var p audit.Period
		if m, err := time.Parse("200601", strings.TrimPrefix(name, "audit_events_m")); err == nil {
			p = short(m)
		} else if y, err := time.Parse("2006", strings.TrimPrefix(name, "audit_events_y")); err == nil {
			p = long(y)
		} else {
			t.Fatalf("partition %s", name)
		}
		if !p.End().After(now) {
			wantPartitions++
		}
	}

	p, err := audit.Purge(ctx, pool, now)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := int64(0)
	for _, n := range expired {
		wantRows += int64(n)
	}
	if p.Partitions != wantPartitions || p.Rows != wantRows {
		t.Fatalf("purged %+v, want %d partitions and %d rows", p, wantPartitions, wantRows)
	}
	after := read()
	for id, r := range before {
		_, kept := after[id]
		switch {
		case !r.until.Before(now) && !kept:
			t.Errorf("row %d (%s) was kept until %s and is gone", id, r.name, r.until)
		case !kept && !strings.HasPrefix(r.name, "month") && !strings.HasPrefix(r.name, "last-year"):
			t.Errorf("row %d (%s) of a period not over is gone", id, r.name)
		case kept && (strings.HasPrefix(r.name, "month") || strings.HasPrefix(r.name, "last-year")):
			t.Errorf("row %d (%s) of a period over is still here", id, r.name)
		}
	}
	left := partitions(t, ctx, pool)
	for name := range expired {
		if _, ok := left[name]; ok {
			t.Errorf("%s is still here", name)
		}
	}
	if !left[leaf(short(this))] || !left[leaf(long(thisYear))] {
		t.Error("this month's or this year's partition is gone")
	}
	if again, err := audit.Purge(ctx, pool, now); err != nil || again != (audit.Purged{}) {
		t.Fatalf("again: %+v (%v)", again, err)
	}
	// The database refuses to drop a period that is not over, whoever asks.
	for _, p := range []audit.Period{short(this), long(thisYear)} {
		if _, err := pool.Exec(ctx, `SELECT gatehouse_audit_detach($1, $2::date, $3)`, p.Band, p.First, now); err == nil {
			t.Fatalf("the partition of %v was detached", p)
		}
	}
}

// The roll-up's watermark (internal/rollup) reads the transactions
// writing audit_events from the parent's locks: an insert through the
// partitioned parent holds one until it ends, and an insert straight into
// a partition (which would hold none) fails, for want of an id.
func TestPartitionedInsert_HoldsTheParentsLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	ws := newWorkspace(t, ctx, pool)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id) VALUES ($1, 'system', 'test.locked', 'test', 'x')`, ws); err != nil {
		t.Fatal(err)
	}
	var writers []string
	if err := pool.QueryRow(ctx, `SELECT gatehouse_table_writers(to_regclass('audit_events'))`).Scan(&writers); err != nil || len(writers) != 1 {
		t.Fatalf("writers of audit_events: %v (%v), want the open transaction", writers, err)
	}
	tx.Rollback(ctx)
	if err := pool.QueryRow(ctx, `SELECT gatehouse_table_writers(to_regclass('audit_events'))`).Scan(&writers); err != nil || len(writers) != 0 {
		t.Fatalf("writers after: %v (%v)", writers, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_events_short_default (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at, retention_until)
		VALUES ($1, 'system', 'test.direct', 'test', 'x', '{}', now(), now())`, ws); err == nil {
		t.Fatal("an insert straight into a partition went in")
	}
}
