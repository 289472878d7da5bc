package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// audit purge drops the partitions of the months that are over, with
// their rows (one in its month's partition, one still in the default
// partition), and keeps every row of a month not over: one already past
// its retention but expiring this month, one kept until tomorrow, one
// kept for decades in the default partition.
func TestAuditPurge_DropsOnlyPartitionsPastRetention(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The partition of two months ago; none for five months ago.
	if _, err := conn.Exec(ctx, `SELECT gatehouse_audit_partition('short', (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '2 months')::date)`); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `
		WITH ws AS (INSERT INTO workspaces (slug, name) VALUES ('w', 'W') RETURNING id),
		     month AS (SELECT date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS first)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, retention_until)
		SELECT ws.id, 'system', 'test.' || r.name, 'test', r.name, r.until
		FROM ws, month, LATERAL (VALUES
			('in_partition', month.first - interval '2 months' + interval '1 day'),
			('in_default', month.first - interval '5 months' + interval '1 day'),
			('this_month', month.first),
			('tomorrow', now() + interval '1 day'),
			('far_ahead', now() + interval '40 years')) AS r(name, until)`)
	if err != nil {
		t.Fatal(err)
	}
	var inDefault bool
	if err := conn.QueryRow(ctx, "SELECT tableoid = 'audit_events_short_default'::regclass FROM audit_events WHERE subject_id = 'in_default'").Scan(&inDefault); err != nil || !inDefault {
		t.Fatalf("the row of five months ago is not in the default partition (%v)", err)
	}
	s := &server{env: map[string]string{"DATABASE_URL": url}}
	out := s.cli(t, "", "audit", "purge")
	var rows, partitions int
	var noun string
	if _, err := fmt.Sscanf(out, "purged %d audit rows past their retention (%d %s dropped)", &rows, &partitions, &noun); err != nil || rows != 2 || partitions < 2 {
		t.Fatalf("output %q (%v): want 2 rows in 2 partitions at least", out, err)
	}
	rs, _ := conn.Query(ctx, "SELECT subject_id FROM audit_events ORDER BY id")
	left, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil || strings.Join(left, " ") != "this_month tomorrow far_ahead" {
		t.Fatalf("left %v, %v", left, err)
	}
	if out := s.cli(t, "", "audit", "purge"); strings.TrimSpace(out) != "purged 0 audit rows past their retention (0 partitions dropped)" {
		t.Fatalf("second purge: %q", out)
	}
}
