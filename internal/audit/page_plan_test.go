package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// recorder passes statements to the pool and keeps the audit page's last
// one, with its arguments, to be explained as the page ran it.
type recorder struct {
	db.DBTX
	sql  string
	args []any
}

func (r *recorder) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "-- name: ListAuditPage ") {
		r.sql, r.args = sql, args
	}
	return r.DBTX.Query(ctx, sql, args...)
}

// pageFixture is a workspace's six months of calls, in partitions as the
// server keeps them.
type pageFixture struct {
	ws, owner, admin uuid.UUID
	ownerEmail       string
	call, packet     string // a call with a packet: its ids
	conv             string // the conversation of most calls
}

// fillCalls writes n calls over the last 180 days, oldest first, as the
// server writes their audit rows: each call's proposal.created (naming
// its conversation) and proposal.applied; one in 7 approved through a
// packet instead (approval.approved about the packet, naming the call,
// and the call's proposal.settled naming the packet); one in 50 refused
// at the gate; one in 100 a settings change by the admin. Their months'
// partitions are made, the hours' map folded, and the table analyzed.
func fillCalls(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) pageFixture {
	t.Helper()
	var f pageFixture
	f.ownerEmail = "owner-" + uuid.NewString()[:8] + "@example.com"
	if err := pool.QueryRow(ctx, `
		WITH w AS (INSERT INTO workspaces (slug, name) VALUES ($1, 'plan') RETURNING id),
		     o AS (INSERT INTO users (email, password_hash) VALUES ($2, 'x') RETURNING id),
		     a AS (INSERT INTO users (email, password_hash) VALUES ('admin-' || $2, 'x') RETURNING id),
		     m AS (INSERT INTO workspace_members (workspace_id, user_id, role) SELECT w.id, o.id, 'member' FROM w, o
		           UNION ALL SELECT w.id, a.id, 'admin' FROM w, a RETURNING 1)
		SELECT w.id, o.id, a.id FROM w, o, a, (SELECT count(*) FROM m) mm`, "plan-"+uuid.NewString()[:8], f.ownerEmail).
		Scan(&f.ws, &f.owner, &f.admin); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		WITH calls AS (
			SELECT i, gatehouse_uuid_v7() AS call, gatehouse_uuid_v7() AS packet,
			       CASE WHEN i % 10 = 0 THEN gatehouse_uuid_v7() ELSE $4::uuid END AS conv,
			       now() - interval '180 days' + i * (interval '180 days' / $3) AS at,
			       CASE WHEN i % 9 = 0 THEN interval '30 days' WHEN i % 5 = 0 THEN interval '3650 days' ELSE interval '365 days' END AS keep
			FROM generate_series(1, $3::int) i
		)
		INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, action, subject_type, subject_id, data, created_at, retention_until)
		SELECT $1::uuid, x.kind, x.actor, x.action, x.subject_type, x.subject_id, x.data, c.at + x.after, c.at + x.after + c.keep
		FROM calls c, LATERAL (VALUES
			(1, 'agent', $2::uuid, CASE WHEN c.i % 50 = 0 THEN 'proposal.refused' ELSE 'proposal.created' END,
			    CASE WHEN c.i % 50 = 0 THEN 'tool' ELSE 'proposal' END, CASE WHEN c.i % 50 = 0 THEN 'webhook.post' ELSE c.call::text END,
			    jsonb_build_object('tool', 'records.put', 'scope', 'conversation', 'scope_id', c.conv, 'rationale', 'file the invoice'), interval '0'),
			(2, 'agent', $2::uuid, 'proposal.applied', 'proposal', c.call::text, '{"path": "auto", "tool": "records.put"}'::jsonb, interval '1 ms'),
			(3, 'user', $5::uuid, 'approval.approved', 'approval', c.packet::text, jsonb_build_object('proposal_id', c.call), interval '1 minute'),
			(4, 'system', NULL, 'proposal.settled', 'proposal', c.call::text, jsonb_build_object('approval_id', c.packet), interval '2 minutes'),
			(5, 'user', $5::uuid, 'workspace.setting_changed', 'workspace', $1::text, '{"setting": "rationale_mode"}'::jsonb, interval '3 minutes')
		) AS x (n, kind, actor, action, subject_type, subject_id, data, after)
		WHERE CASE x.n WHEN 1 THEN true WHEN 2 THEN c.i % 50 <> 0 AND c.i % 7 <> 0 WHEN 5 THEN c.i % 100 = 0 ELSE c.i % 7 = 0 AND c.i % 50 <> 0 END
		ORDER BY c.i, x.n`, f.ws, f.owner, n, uuid.New(), f.admin); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT subject_id, data->>'proposal_id' FROM audit_events WHERE workspace_id = $1 AND action = 'approval.approved' ORDER BY id DESC OFFSET 20 LIMIT 1`, f.ws).
		Scan(&f.packet, &f.call); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT data->>'scope_id' FROM audit_events WHERE workspace_id = $1 AND action = 'proposal.created' LIMIT 1`, f.ws).Scan(&f.conv); err != nil {
		t.Fatal(err)
	}
	// As the server leaves them: the months' partitions made (the rows
	// moved out of the default partition), the roll-up caught up and the
	// hours folded, the statistics gathered.
	if _, err := audit.EnsurePartitions(ctx, pool, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE rollup_feeds SET folded_to = h.id, next_to = h.id FROM (SELECT max(id) AS id FROM audit_events) h WHERE feed = 'audit_events'`); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.FoldHours(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE audit_events`); err != nil {
		t.Fatal(err)
	}
	return f
}

// filled is the partitions of audit_events that hold at least n rows.
func filled(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT tableoid::regclass::text FROM audit_events GROUP BY 1 HAVING count(*) >= $1`, n)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// Every filter of the audit page reads through an index, and no
// partition that holds rows is read whole: with 4,000 calls over six
// months in their partitions, an object that names a few rows (a call, a
// packet) is a bitmap of the object indexes, actor and action walk
// theirs newest first, an action every call writes and the unfiltered
// page walk the primary key newest first, and a time range walks ids
// bounded by the hours' map. And the page shows what it showed: each
// filter's rows are those the filter's definition selects, newest first.
func TestAuditPage_EveryFilterReadsAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := fillCalls(t, ctx, pool, 4000)
	if all := filled(t, ctx, pool, 1); len(all) < 8 || slices.ContainsFunc(all, func(p string) bool { return strings.HasSuffix(p, "_default") }) {
		t.Fatalf("the rows are in %v: want them in their months' partitions", all)
	}
	// A partition of a few pages (rows kept 30 days, a ninth of the calls)
	// is read whole: no index is cheaper. The others must not be.
	parts := filled(t, ctx, pool, 500)
	if len(parts) < 5 {
		t.Fatalf("%d partitions of 500 rows or more: %v", len(parts), parts)
	}
	now := time.Now().UTC()
	month := func(back int) string { return now.AddDate(0, -back, 0).Format("2006-01-02") }
	admin := audit.Viewer{WorkspaceID: f.ws, UserID: f.admin, Admin: true}
	owner := audit.Viewer{WorkspaceID: f.ws, UserID: f.owner}
	for _, c := range []struct {
		name    string
		viewer  audit.Viewer
		filter  audit.Filter
		indexes []string // each read in the plan
		sql     string   // the rows the filter selects (the workspace's is $1)
	}{
		{"no filter", admin, audit.Filter{}, []string{"Index Scan Backward using audit_events_pkey_m"}, `true`},
		{"a call's history", admin, audit.Filter{Object: f.call},
			[]string{"Bitmap Index Scan on audit_events_object_idx_m", "Bitmap Index Scan on audit_events_proposal_idx_m", "Bitmap Index Scan on audit_events_approval_idx_m", "Bitmap Index Scan on audit_events_scope_idx_m"},
			fmt.Sprintf(`'%[1]s' IN (subject_id, data->>'proposal_id', data->>'approval_id', data->>'scope_id')`, f.call)},
		{"a packet's history", admin, audit.Filter{Object: f.packet}, []string{"Bitmap Index Scan on audit_events_approval_idx_m"},
			fmt.Sprintf(`'%[1]s' IN (subject_id, data->>'proposal_id', data->>'approval_id', data->>'scope_id')`, f.packet)},
		{"a conversation's history", admin, audit.Filter{Object: f.conv}, nil,
			fmt.Sprintf(`'%[1]s' IN (subject_id, data->>'proposal_id', data->>'approval_id', data->>'scope_id')`, f.conv)},
		{"by actor", admin, audit.Filter{Actor: strings.ToUpper(f.ownerEmail)}, []string{"Index Scan Backward using audit_events_actor_idx_m"},
			fmt.Sprintf(`actor_user_id = '%s'`, f.owner)},
		{"by action", admin, audit.Filter{Action: "approval.approved"}, []string{"Index Scan Backward using audit_events_action_idx_m"}, `action = 'approval.approved'`},
		{"by an action every call writes", admin, audit.Filter{Action: "proposal.created"}, []string{"Index Scan Backward using audit_events_pkey_m"},
			`action = 'proposal.created'`},
		{"a month three months ago", admin, audit.Filter{From: month(4), To: month(3)}, []string{"Index Cond: ((id >= "},
			fmt.Sprintf(`created_at >= '%s' AND created_at < '%sT00:00:00Z'::timestamptz + interval '1 day'`, month(4)+"T00:00:00Z", month(3))},
		{"since an hour ago", admin, audit.Filter{From: now.Add(-time.Hour).Format("2006-01-02T15:04")}, []string{"Index Cond: ((id >= "},
			fmt.Sprintf(`created_at >= '%s'`, now.Add(-time.Hour).Format("2006-01-02T15:04:00Z"))},
		{"a member's call", owner, audit.Filter{Object: f.call}, []string{"Bitmap Index Scan on audit_events_object_idx_m"},
			fmt.Sprintf(`'%[1]s' IN (subject_id, data->>'proposal_id', data->>'approval_id', data->>'scope_id') AND actor_user_id = '%[2]s'`, f.call, f.owner)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{DBTX: pool}
			page, err := audit.List(ctx, db.New(rec), c.viewer, c.filter)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := pool.Query(ctx, "EXPLAIN "+rec.sql, rec.args...)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			for _, index := range c.indexes {
				if !strings.Contains(plan, index) {
					t.Errorf("the plan does not read %s:\n%s", index, plan)
				}
			}
			for _, part := range parts {
				if strings.Contains(plan, "Seq Scan on "+part+" ") {
					t.Errorf("the plan reads every row of %s:\n%s", part, plan)
				}
			}
			// The rows the filter selects, newest first, a page of them.
			rows, err = pool.Query(ctx, `SELECT id FROM audit_events WHERE workspace_id = $1 AND (`+c.sql+`) ORDER BY id DESC LIMIT 50`, f.ws)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, e := range page.Entries {
				got = append(got, e.ID)
			}
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("the page shows %v, want %v", got, want)
			}
		})
	}
}

// A time range finds its rows whether or not the hours' map has counted
// them: rows written after its watermark, and a row whose created_at is
// far from its id's neighbours' (written with an old time), are on the
// page.
func TestAuditPage_TimeRangeFindsRowsTheHoursMapHasNotCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := fillCalls(t, ctx, pool, 500)
	var late []int64
	rows, err := pool.Query(ctx, `
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, created_at)
		VALUES ($1, 'system', 'test.late', 'test', 'old-time', now() - interval '100 days'),
		       ($1, 'system', 'test.late', 'test', 'now', now())
		RETURNING id`, f.ws)
	if err != nil {
		t.Fatal(err)
	}
	if late, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	admin := audit.Viewer{WorkspaceID: f.ws, UserID: f.admin, Admin: true}
	for _, c := range []struct {
		name   string
		filter audit.Filter
		want   int64
	}{
		{"written with an old time", audit.Filter{Action: "test.late", From: time.Now().AddDate(0, 0, -101).Format("2006-01-02"), To: time.Now().AddDate(0, 0, -99).Format("2006-01-02")}, late[0]},
		{"written now", audit.Filter{Action: "test.late", From: time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04")}, late[1]},
	} {
		for _, folded := range []bool{false, true} {
			if folded {
				if _, err := pool.Exec(ctx, `UPDATE rollup_feeds SET folded_to = h.id, next_to = h.id FROM (SELECT max(id) AS id FROM audit_events) h WHERE feed = 'audit_events'`); err != nil {
					t.Fatal(err)
				}
				if _, err := audit.FoldHours(ctx, pool); err != nil {
					t.Fatal(err)
				}
			}
			page, err := audit.List(ctx, db.New(pool), admin, c.filter)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Entries) != 1 || page.Entries[0].ID != c.want {
				t.Errorf("%s (folded: %v): the page shows %+v, want row %d", c.name, folded, page.Entries, c.want)
			}
		}
	}
}

// A member's page reads windows of ids, newest first, until it has a
// page: with windows of 20 ids, a member whose rows are few and far
// between (one in 29) and one whose rows are most of the log see exactly
// the rows they may see, newest first, page after page.
func TestAuditPage_AMembersPageReadsWindowsAndMissesNothing(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := fillCalls(t, ctx, pool, 1500)
	var sparse uuid.UUID
	if err := pool.QueryRow(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash) VALUES ('sparse-' || $1::text || '@example.com', 'x') RETURNING id),
		     m AS (INSERT INTO workspace_members (workspace_id, user_id, role) SELECT $1::uuid, u.id, 'member' FROM u RETURNING user_id),
		     a AS (UPDATE audit_events SET actor_user_id = (SELECT user_id FROM m) WHERE workspace_id = $1::uuid AND id % 29 = 0 RETURNING 1)
		SELECT user_id FROM m, (SELECT count(*) FROM a) n`, f.ws).Scan(&sparse); err != nil {
		t.Fatal(err)
	}
	defer audit.SetFirstWindow(20)()
	for _, c := range []struct {
		name    string
		viewer  uuid.UUID
		filter  audit.Filter
		atLeast int // rows to see
	}{
		{"few rows", sparse, audit.Filter{}, 60},
		{"most rows", f.owner, audit.Filter{}, 60},
		{"most rows, an action", f.owner, audit.Filter{Action: "proposal.applied"}, 60},
		{"few rows, a time range", sparse, audit.Filter{From: time.Now().AddDate(0, -4, 0).Format("2006-01-02"), To: time.Now().AddDate(0, -1, 0).Format("2006-01-02")}, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var from, to any
			if c.filter.From != "" {
				from, to = c.filter.From+"T00:00:00Z", c.filter.To+"T00:00:00Z"
			}
			rows, err := pool.Query(ctx, `SELECT id FROM audit_events WHERE workspace_id = $1 AND actor_user_id = $2 AND ($3 = '' OR action = $3)
				AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5::timestamptz + interval '1 day') ORDER BY id DESC`,
				f.ws, c.viewer, c.filter.Action, from, to)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(want) < c.atLeast {
				t.Fatalf("%d rows to see (%v): want %d at least", len(want), err, c.atLeast)
			}
			var got []int64
			filter := c.filter
			for pages := 0; ; pages++ {
				page, err := audit.List(ctx, db.New(pool), audit.Viewer{WorkspaceID: f.ws, UserID: c.viewer}, filter)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Entries {
					got = append(got, e.ID)
				}
				if page.Next == 0 || pages > 100 {
					break
				}
				filter.Before = fmt.Sprint(page.Next)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the pages show %d rows, want %d:\n%v\n%v", len(got), len(want), got, want)
			}
		})
	}
}
