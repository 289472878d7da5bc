package proposals_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// recorder is an Announcer that, for every announcement, reads the
// proposal from another connection: what it reads was committed.
type recorder struct {
	mu     sync.Mutex
	pool   *pgxpool.Pool
	id     uuid.UUID // the proposal to read, once known
	topics []string
	seen   []string // the proposal's status as another connection saw it
}

func (r *recorder) Announce(_ uuid.UUID, topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics = append(r.topics, topic)
	var status string
	if r.id != uuid.Nil {
		r.pool.QueryRow(context.Background(), "SELECT status FROM proposals WHERE id = $1", r.id).Scan(&status)
	}
	r.seen = append(r.seen, status)
}

func (r *recorder) take() (topics, seen []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	topics, seen = r.topics, r.seen
	r.topics, r.seen = nil, nil
	return
}

func TestAnnounce_AfterCommitToTheScopeAndItsOwner(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{pool: f.pool}
	f.props.SetAnnouncer(rec)
	ctx := context.Background()
	conv := f.conversation(t, "approve")
	owner := events.User(f.owner.UserID)

	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.put", `{"collection":"c","key":"k","value":{}}`))
	if err != nil || p.Status != proposals.StatusPending {
		t.Fatalf("propose: %v %v", p.Status, err)
	}
	topics, _ := rec.take()
	if !contains(topics, events.Conversation(conv)) || !contains(topics, owner) || contains(topics, events.TopicApprovals) {
		t.Fatalf("propose announced %v", topics)
	}
	rec.id = p.ID
	if _, err := f.props.Apply(ctx, f.owner, p.ID, nil); err != nil {
		t.Fatal(err)
	}
	topics, seen := rec.take()
	if !contains(topics, events.Conversation(conv)) || !contains(topics, owner) {
		t.Fatalf("apply announced %v", topics)
	}
	for _, s := range seen {
		if s != proposals.StatusApplied {
			t.Fatalf("an announcement came before its commit: another connection saw %q", s)
		}
	}

	// The automatic path announces too (a read runs at once).
	nb, err := f.nbs.Create(ctx, f.owner, "nb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Propose(ctx, f.agent, proposals.InNotebook(nb.ID), call("records.search", `{"query":"k"}`)); err != nil {
		t.Fatal(err)
	}
	if topics, _ := rec.take(); !contains(topics, events.Notebook(nb.ID)) || !contains(topics, owner) {
		t.Fatalf("the automatic path announced %v", topics)
	}

	// Reject announces; a refused call (nothing recorded) need not.
	p, err = f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.put", `{"collection":"c","key":"x","value":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	rec.take()
	if _, err := f.props.Reject(ctx, f.owner, p.ID, "no"); err != nil {
		t.Fatal(err)
	}
	if topics, _ := rec.take(); !contains(topics, events.Conversation(conv)) {
		t.Fatalf("reject announced %v", topics)
	}
}

func TestAnnounce_NilAnnouncerIsSafe(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(t, "approve")
	if _, err := f.props.Propose(context.Background(), f.agent, proposals.InConversation(conv), call("records.put", `{"collection":"c","key":"k","value":{}}`)); err != nil {
		t.Fatal(err)
	}
}
