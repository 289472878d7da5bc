package proposals_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// proxied is a second service on the fixture's database, reaching it
// through a proxy that can lose a COMMIT's answer.
func proxied(t *testing.T, f *fixture) (*proposals.Service, *dbtest.Proxy) {
	t.Helper()
	proxy := dbtest.MustProxy(t, f.pool.Config().ConnString())
	pool, err := db.NewPool(context.Background(), proxy.URL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return proposals.NewService(pool, registry, slog.New(slog.DiscardHandler)), proxy
}

// checkOutcomeUnknown checks that err says the call's outcome is unknown,
// names its proposal, and keeps the connection's own error in its chain.
// It returns the proposal's id.
func checkOutcomeUnknown(t *testing.T, what string, err error) uuid.UUID {
	t.Helper()
	var ue *proposals.OutcomeUnknownError
	switch {
	case !errors.Is(err, proposals.ErrOutcomeUnknown) || !errors.As(err, &ue):
		t.Fatalf("%s: %v, want ErrOutcomeUnknown", what, err)
	case !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, pgconn.ErrConnClosed):
		t.Fatalf("%s: %v has lost the connection's error from its chain", what, err)
	case ue.ProposalID == uuid.Nil:
		t.Fatalf("%s: %v names no proposal", what, err)
	}
	return ue.ProposalID
}

// recordedStatus is the status of each proposal that exists.
func recordedStatus(t *testing.T, f *fixture, ids []uuid.UUID) map[uuid.UUID]string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), "SELECT id, status FROM proposals WHERE id = ANY($1)", ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		out[id] = status
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

func waitFired(t *testing.T, fired <-chan struct{}) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("no COMMIT went through the proxy")
	}
}

func TestGroupCommit_ACommitWhoseAnswerIsLostLeavesEveryCallOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, delivered := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", delivered), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			props, proxy := proxied(t, f)
			conv := proposals.InConversation(f.conversation(t, "auto"))
			var calls []proposals.Together
			for i := range 3 {
				calls = append(calls, proposals.Together{P: f.agent, Scope: conv,
					In: auto("records.put", fmt.Sprintf(`{"collection": "c", "key": "k%d", "value": {"n": %d}}`, i, i))})
			}
			fired := proxy.CutAtCommit(`"k2"`, delivered)
			_, errs, alone := props.ProposeTogether(context.Background(), calls)
			waitFired(t, fired)
			var ids []uuid.UUID
			for i, err := range errs {
				if alone[i] {
					t.Fatalf("call %d ran again alone after its group's COMMIT was sent", i)
				}
				ids = append(ids, checkOutcomeUnknown(t, fmt.Sprintf("call %d", i), err))
			}
			// The ids name what really happened: every call, or none.
			got := recordedStatus(t, f, ids)
			for _, id := range ids {
				if delivered && got[id] != proposals.StatusApplied || !delivered && got[id] != "" {
					t.Errorf("proposal %s: %q (committed: %v)", id, got[id], delivered)
				}
			}
		})
	}
}

func TestPropose_ACommitWhoseAnswerIsLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, delivered := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", delivered), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			props, proxy := proxied(t, f)
			props.SetGroupCommit(0)
			conv := proposals.InConversation(f.conversation(t, "auto"))
			fired := proxy.CutAtCommit(`"k"`, delivered)
			// The record travels with the COMMIT (no key to link).
			_, err := props.Propose(context.Background(), f.agent, conv, auto("records.put", `{"collection": "c", "key": "k", "value": {}}`))
			waitFired(t, fired)
			id := checkOutcomeUnknown(t, "the call", err)
			want := ""
			if delivered {
				want = proposals.StatusApplied
			}
			if got := recordedStatus(t, f, []uuid.UUID{id})[id]; got != want {
				t.Errorf("proposal %s: %q, want %q", id, got, want)
			}
		})
	}
}
