package events_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/events"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// listener is a connection LISTENing on the events channel, as every
// instance has one.
func listener(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), "LISTEN "+events.Channel); err != nil {
		t.Fatal(err)
	}
	return conn
}

// receiveUntil reads payloads until stop arrives, counting each.
func receiveUntil(t *testing.T, conn *pgx.Conn, stop string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[string]int{}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for %q, got %v: %v", stop, got, err)
		}
		if n.Payload == stop {
			return got
		}
		got[n.Payload]++
	}
}

func TestBus_CoalescesAndDeliversToEveryListener(t *testing.T) {
	pool := dbtest.MustPool(t)
	url := pool.Config().ConnString()
	a, b := listener(t, url), listener(t, url)
	bus := events.NewBus(pool, quiet())
	ws, conv := uuid.New(), uuid.New()
	for range 100 {
		bus.Announce(ws, events.TopicApprovals)
		bus.Announce(ws, events.Conversation(conv))
	}
	if n := bus.Pending(); n != 2 {
		t.Fatalf("pending = %d, want 2 distinct announcements", n)
	}
	if err := bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := bus.Pending(); n != 0 {
		t.Fatalf("pending after flush = %d", n)
	}
	// A second batch marks the end of the first.
	bus.Announce(ws, "end")
	if err := bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{ws.String() + ":approvals": 1, ws.String() + ":conversation." + conv.String(): 1}
	for name, conn := range map[string]*pgx.Conn{"a": a, "b": b} {
		got := receiveUntil(t, conn, ws.String()+":end")
		if len(got) != len(want) {
			t.Fatalf("listener %s got %v, want %v", name, got, want)
		}
		for p, n := range want {
			if got[p] != n {
				t.Fatalf("listener %s got %v, want %v", name, got, want)
			}
		}
	}
}

func TestBus_RunFlushesWithoutBeingAsked(t *testing.T) {
	pool := dbtest.MustPool(t)
	conn := listener(t, pool.Config().ConnString())
	bus := events.NewBus(pool, quiet())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { bus.Run(ctx); close(done) }()
	ws := uuid.New()
	bus.Announce(ws, "one")
	got := receiveUntil(t, conn, ws.String()+":one")
	if len(got) != 0 {
		t.Fatalf("unexpected payloads %v", got)
	}
	// What is announced just before shutdown is still sent.
	cancel()
	bus.Announce(ws, "last")
	<-done
	bus.Flush(context.Background()) // whatever Run's last flush did not see
	receiveUntil(t, conn, ws.String()+":last")
}

func TestBus_BoundedPending(t *testing.T) {
	bus := events.NewBus(failing{}, quiet())
	bus.SetMaxPending(3)
	ws := uuid.New()
	for i := range 10 {
		bus.Announce(ws, uuid.NewString()[:i+1])
	}
	if n := bus.Pending(); n != 3 {
		t.Fatalf("pending = %d, want the bound 3", n)
	}
}

func TestBus_FailedFlushIsRetriedOnce(t *testing.T) {
	f := &flaky{fail: 1}
	bus := events.NewBus(f, quiet())
	bus.Announce(uuid.New(), "x")
	if err := bus.Flush(context.Background()); err != nil {
		t.Fatalf("flush after one failure: %v", err)
	}
	if f.calls != 2 {
		t.Fatalf("calls = %d, want 2 (one retry)", f.calls)
	}
	f2 := &flaky{fail: 5}
	bus = events.NewBus(f2, quiet())
	bus.Announce(uuid.New(), "x")
	if err := bus.Flush(context.Background()); err == nil {
		t.Fatal("flush that fails twice reports no error")
	}
	if f2.calls != 2 || bus.Pending() != 0 {
		t.Fatalf("calls = %d, pending = %d: want 2 tries and the batch given up", f2.calls, bus.Pending())
	}
}

func TestBus_NilIsSafe(t *testing.T) {
	var bus *events.Bus
	bus.Announce(uuid.New(), "x") // no panic
}

type failing struct{}

func (failing) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("down")
}

type flaky struct{ fail, calls int }

func (f *flaky) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	f.calls++
	if f.calls <= f.fail {
		return pgconn.CommandTag{}, errors.New("down")
	}
	return pgconn.CommandTag{}, nil
}
