package audit_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// Folding the hours when nothing is new writes nothing: the server does it
// every second on every instance, idle or not. A row lock would leave its
// transaction's id in the watermark row's xmax (and a WAL record and a
// transaction id behind it); folding replaces the row, whose new version
// has none.
func TestFoldHours_WithNothingNewLocksNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.MustPool(t)
	for range 3 {
		if n, err := audit.FoldHours(ctx, pool); err != nil || n != 0 {
			t.Fatalf("folding an empty database: %d, %v", n, err)
		}
	}
	var xmax string
	if err := pool.QueryRow(ctx, `SELECT xmax::text FROM audit_hours_folded`).Scan(&xmax); err != nil {
		t.Fatal(err)
	}
	if xmax != "0" {
		t.Errorf("the hours' watermark row was locked by transaction %s with nothing to fold", xmax)
	}
}
