package proposals_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// roundTrips counts what a pool sends: each query and each batch is one
// round trip (statements already prepared).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An auto-applied call is three round trips: BEGIN with the rows its
// decision reads, the tool's statement, and the record (proposal,
// transcript line, audit row, receipt) with COMMIT. And it is all there
// afterwards: the pipelining loses nothing.
func TestPropose_AutoAppliedCallIsThreeRoundTrips(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "auto")

	cfg, err := pgxpool.ParseConfig(f.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	counter := &roundTrips{}
	cfg.ConnConfig.Tracer = counter
	cfg.AfterConnect = db.AfterConnect
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	svc := proposals.NewService(pool, registry, slog.New(slog.DiscardHandler))
	svc.SetLimitSync(time.Hour) // records.put's limit per agent shares its count off the call path: not now
	in := call("records.put", `{"collection":"c","key":"k","value":{"n":1}}`)
	// The first call prepares the statements (a round trip each).
	if _, err := svc.Propose(ctx, f.agent, proposals.InConversation(conv), in); err != nil {
		t.Fatal(err)
	}
	counter.n.Store(0)
	in = call("records.put", `{"collection":"c","key":"k2","value":{"n":2}}`)
	got, err := svc.Propose(ctx, f.agent, proposals.InConversation(conv), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := counter.n.Load(); n != 3 {
		t.Errorf("an auto-applied call took %d round trips, want 3", n)
	}
	if got.Status != proposals.StatusApplied {
		t.Fatalf("status %q, want applied", got.Status)
	}
	// Committed, with everything the call writes.
	var lines, audits, receiptsN, records int
	if err := f.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM transcript_lines WHERE proposal_id = $1),
		(SELECT count(*) FROM audit_events WHERE subject_id = $1::text),
		(SELECT count(*) FROM receipts WHERE proposal_id = $1),
		(SELECT count(*) FROM records WHERE key = 'k2')`, got.ID).Scan(&lines, &audits, &receiptsN, &records); err != nil {
		t.Fatal(err)
	}
	if lines != 1 || audits != 1 || receiptsN != 1 || records != 1 {
		t.Fatalf("after the call: %d transcript lines, %d audit rows, %d receipts, %d records; want 1, 1, 1, 1", lines, audits, receiptsN, records)
	}
	// The connection went back to the pool out of its transaction: the
	// next call runs on it (one connection).
	if _, err := svc.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.get", `{"collection":"c","key":"k2"}`)); err != nil {
		t.Fatal(err)
	}
	if s := pool.Stat(); s.TotalConns() != 1 || s.AcquiredConns() != 0 {
		t.Fatalf("pool: %d connections, %d acquired; want 1 idle", s.TotalConns(), s.AcquiredConns())
	}
}
