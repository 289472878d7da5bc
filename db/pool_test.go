package db_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// Every connection of Gatehouse's pools compiles nothing: JIT is off for
// the session, so a statement whose estimate passes jit_above_cost (the
// audit hours' fold's generic plan did, and compiled for 50-420 ms once
// a second) runs as it is planned.
func TestPool_NoJIT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := dbtest.MustPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var jit string
	if err := conn.QueryRow(ctx, `SHOW jit`).Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" {
		t.Fatalf("jit = %q on a pool connection, want off", jit)
	}
	// Any plan at all passes the threshold now: still nothing compiled.
	if _, err := conn.Exec(ctx, `SET jit_above_cost = 0`); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM audit_events WHERE id > 0`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if _, ok := plan[0]["JIT"]; ok {
		b, _ := json.Marshal(plan)
		t.Fatalf("the plan was compiled: %s", b)
	}
}
