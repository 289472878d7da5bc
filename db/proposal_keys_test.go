package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// insertProposal writes a conversation's proposal with the given
// workspace, owner, conversation and proposer.
const insertProposal = `
	INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect,
	                       arguments, rationale, permission_mode, disposition)
	VALUES ($1, $2, $3, $4, 'agent', 'records.put', 'mutate', '{}', 'a fixture call', 'auto', 'auto-apply')`

// A proposal names its scope, workspace and owner with one key
// (migration 24): the scope must exist in that workspace with that owner,
// and the proposer must be the owner. Each column checked alone let a
// proposal name another workspace's or another owner's conversation.
func TestProposalKeys_ScopeWorkspaceOwnerAndProposerAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	a := newCallFixture(t, ctx, pool, "keys-a")
	b := newCallFixture(t, ctx, pool, "keys-b")

	for _, tc := range []struct {
		name                      string
		ws, owner, conv, proposer any
		code                      string
	}{
		{"the scope's own workspace, owner and proposer", a.ws, a.user, a.conv, a.user, ""},
		{"another workspace's conversation", b.ws, b.user, a.conv, b.user, "23503"},
		{"the conversation under another workspace", b.ws, a.user, a.conv, a.user, "23503"},
		{"the conversation under another owner", a.ws, a.guest, a.conv, a.guest, "23503"},
		{"a conversation that does not exist", a.ws, a.user, a.proposal, a.user, "23503"},
		{"a proposer who is not the owner", a.ws, a.user, a.conv, a.guest, "23514"},
	} {
		_, err := pool.Exec(ctx, insertProposal, tc.ws, tc.owner, tc.conv, tc.proposer)
		var pgErr *pgconn.PgError
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: %v; want it written", tc.name, err)
		case tc.code != "" && (!errors.As(err, &pgErr) || pgErr.Code != tc.code):
			t.Errorf("%s: %v; want SQLSTATE %s", tc.name, err, tc.code)
		}
	}
}

// Deletes do what the single-column keys did: a conversation, its owner
// or its workspace takes the conversation's proposals with it, and only
// those.
func TestProposalKeys_ProposalsGoWithTheirScopeOwnerAndWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	byConv := newCallFixture(t, ctx, pool, "keys-conv")
	byUser := newCallFixture(t, ctx, pool, "keys-user")
	byWorkspace := newCallFixture(t, ctx, pool, "keys-ws")
	kept := newCallFixture(t, ctx, pool, "keys-kept")

	proposals := func(f callFixture) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM proposals WHERE workspace_id = $1`, f.ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, del := range []struct {
		sql string
		arg any
		f   callFixture
	}{
		{`DELETE FROM conversations WHERE id = $1`, byConv.conv, byConv},
		{`DELETE FROM users WHERE id = $1`, byUser.user, byUser},
		{`DELETE FROM workspaces WHERE id = $1`, byWorkspace.ws, byWorkspace},
	} {
		if _, err := pool.Exec(ctx, del.sql, del.arg); err != nil {
			t.Fatalf("%s: %v", del.sql, err)
		}
		if n := proposals(del.f); n != 0 {
			t.Errorf("%s left %d proposals", del.sql, n)
		}
	}
	if n := proposals(kept); n != 1 {
		t.Errorf("the other deletes took this workspace's proposal: %d left", n)
	}
}
