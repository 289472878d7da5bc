package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestAuditPurge_DeletesOnlyRowsPastRetention(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		WITH ws AS (INSERT INTO workspaces (slug, name) VALUES ('w', 'W') RETURNING id)
		INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, retention_until)
		SELECT ws.id, 'system', 'test.' || r.name, 'test', r.name, now() + r.keep
		FROM ws, (VALUES ('expired', interval '-1 day'), ('long_expired', interval '-400 days'), ('kept', interval '1 day')) AS r(name, keep)`)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{env: map[string]string{"DATABASE_URL": url}}
	if out := s.cli(t, "", "audit", "purge"); strings.TrimSpace(out) != "purged 2 audit rows past their retention" {
		t.Fatalf("output %q", out)
	}
	var left []string
	rows, _ := conn.Query(ctx, "SELECT subject_id FROM audit_events ORDER BY id")
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(left) != 1 || left[0] != "kept" {
		t.Fatalf("left %v, %v", left, err)
	}
	if out := s.cli(t, "", "audit", "purge"); !strings.HasPrefix(out, "purged 0 ") {
		t.Fatalf("second purge: %q", out)
	}
}
