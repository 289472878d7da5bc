// Package events announces changes to every instance's live pages.
//
// A change is announced after its transaction commits, never inside it: a
// NOTIFY inside a transaction makes PostgreSQL take a global lock at
// commit, which would serialise the commits of every notifying call. The
// Bus instead collects the distinct "<workspace id>:<topic>" payloads
// announced in a short window and sends them all in one statement. Every
// instance (the sender too) receives them through its LISTEN connection
// and fans them out to its open pages, which re-render from the database.
//
// The trade-off: an announcement made just before the process dies is
// lost. Nothing else is: pages re-read the database on the next event and
// on every reconnect.
package events

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// Channel is the PostgreSQL channel every instance LISTENs on.
const Channel = "gatehouse_events"

// Topics announced per workspace. A scope's topic carries its id.
const (
	// TopicApprovals: the workspace's approval packets changed.
	TopicApprovals = "approvals"
	// TopicConversationPrefix + id: a conversation's transcript, cards or
	// mode changed.
	TopicConversationPrefix = "conversation."
	// TopicNotebookPrefix + id: a notebook's cells or trust level changed.
	TopicNotebookPrefix = "notebook."
	// TopicUserPrefix + user id: what waits for that user (home, nav counts).
	TopicUserPrefix = "user."
)

// Conversation is the topic of one conversation.
func Conversation(id uuid.UUID) string { return TopicConversationPrefix + id.String() }

// Notebook is the topic of one notebook.
func Notebook(id uuid.UUID) string { return TopicNotebookPrefix + id.String() }

// User is the topic of what waits for one user.
func User(id uuid.UUID) string { return TopicUserPrefix + id.String() }

// Announcer is what services announce changes to, after they commit. It
// never blocks.
type Announcer interface {
	Announce(ws uuid.UUID, topic string)
}

// Execer runs the flush statement (a *pgxpool.Pool).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// DefaultWindow is how long announcements are collected before a flush.
const DefaultWindow = 25 * time.Millisecond

// DefaultMaxPending bounds the distinct announcements waiting for a flush;
// more are dropped (and counted in the log), since pages re-read the
// database on the next event anyway.
const DefaultMaxPending = 4096

// flushSQL sends every payload in one statement.
const flushSQL = `SELECT pg_notify('` + Channel + `', p) FROM unnest($1::text[]) p`

// Bus coalesces announcements and sends them in batches. The zero value is
// not usable; see NewBus.
type Bus struct {
	db         Execer
	log        *slog.Logger
	window     time.Duration
	maxPending int

	mu      sync.Mutex
	pending map[string]struct{}
	dropped int
	wake    chan struct{}
}

// NewBus returns a bus that flushes through db. Start it with Run.
func NewBus(db Execer, log *slog.Logger) *Bus {
	return &Bus{db: db, log: log, window: DefaultWindow, maxPending: DefaultMaxPending,
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// SetWindow sets how long announcements are collected before a flush.
func (b *Bus) SetWindow(d time.Duration) { b.window = d }

// SetMaxPending bounds the distinct announcements waiting for a flush.
func (b *Bus) SetMaxPending(n int) { b.maxPending = n }

// Announce queues "<ws>:<topic>" for the next flush; an announcement
// already waiting is not queued twice. It never blocks on the database.
func (b *Bus) Announce(ws uuid.UUID, topic string) {
	if b == nil || topic == "" {
		return
	}
	payload := ws.String() + ":" + topic
	b.mu.Lock()
	if _, ok := b.pending[payload]; !ok {
		if len(b.pending) >= b.maxPending {
			b.dropped++
		} else {
			b.pending[payload] = struct{}{}
		}
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Pending is the number of distinct announcements waiting for a flush.
func (b *Bus) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// take empties the pending set.
func (b *Bus) take() ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.pending))
	for p := range b.pending {
		out = append(out, p)
	}
	clear(b.pending)
	dropped := b.dropped
	b.dropped = 0
	return out, dropped
}

// Flush sends every pending announcement in one statement. A failed flush
// is logged and tried once more; if that fails too, the batch is dropped
// (pages catch up on the next event or reconnect).
func (b *Bus) Flush(ctx context.Context) error {
	batch, dropped := b.take()
	if dropped > 0 {
		b.log.Warn("events: announcements dropped, too many pending", "dropped", dropped, "max", b.maxPending)
	}
	if len(batch) == 0 {
		return nil
	}
	_, err := b.db.Exec(ctx, flushSQL, batch)
	if err == nil {
		return nil
	}
	b.log.Warn("events: flush failed, retrying once", "count", len(batch), "err", err)
	if _, err = b.db.Exec(ctx, flushSQL, batch); err != nil {
		b.log.Error("events: flush failed twice, announcements lost", "count", len(batch), "err", err)
		return err
	}
	return nil
}

// Run flushes every window while announcements wait, until ctx ends; then
// it flushes what is left (with a short deadline of its own) and returns.
func (b *Bus) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			b.Flush(fctx)
			cancel()
			return
		case <-b.wake:
		}
		// Collect what else is announced in the window, then send it all.
		select {
		case <-ctx.Done():
		case <-time.After(b.window):
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		b.Flush(fctx)
		cancel()
	}
}
