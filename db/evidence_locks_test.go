package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// evidenceFixture is a workspace, a user and one of their tokens, with
// an audit row and a receipt that name them.
type evidenceFixture struct{ ws, user, token uuid.UUID }

func newEvidenceFixture(t *testing.T, ctx context.Context, pool *pgxpool.Pool, slug string) evidenceFixture {
	t.Helper()
	var f evidenceFixture
	err := pool.QueryRow(ctx, `
		WITH w AS (INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id),
		     u AS (INSERT INTO users (email, password_hash) VALUES ($1 || '@example.com', 'x') RETURNING id),
		     t AS (INSERT INTO api_tokens (workspace_id, user_id, kind, name, token_hash)
		           SELECT w.id, u.id, 'agent', 'a', sha256($1::bytea) FROM w, u RETURNING id, workspace_id, user_id)
		SELECT workspace_id, user_id, id FROM t`, slug).Scan(&f.ws, &f.user, &f.token)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const insertEvidence = `
	WITH a AS (
		INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id)
		VALUES ($1, 'agent', $2, $3, 'proposal.created', 'proposal', 'p')
	)
	INSERT INTO receipts (workspace_id, kind, content, content_hash, metadata)
	VALUES ($1, 'execution', '{}', sha256('{}'::bytea), '{}')`

// Writing evidence (audit rows, receipts) locks nothing it names: while
// another transaction holds the workspace, user and token rows FOR
// UPDATE, an audit row and a receipt naming them are written at once.
// With foreign keys, each write would wait for those rows (KEY SHARE), as
// every concurrent call did on its workspace's row (migration 22).
func TestEvidence_LocksNothingItNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newEvidenceFixture(t, ctx, pool, "evidence-locks")

	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT 1 FROM workspaces w, users u, api_tokens t WHERE w.id = $1 AND u.id = $2 AND t.id = $3 FOR UPDATE`,
		f.ws, f.user, f.token); err != nil {
		t.Fatal(err)
	}

	writer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback(ctx)
	if _, err := writer.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec(ctx, insertEvidence, f.ws, f.user, f.token); err != nil {
		t.Fatalf("writing evidence waited on a row it names: %v", err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Deleting what evidence names does what the foreign keys did: a
// workspace takes its audit rows and receipts with it; a deleted user or
// token is cleared from the audit rows that named it.
func TestEvidence_FollowsDeletesOfWhatItNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	gone := newEvidenceFixture(t, ctx, pool, "evidence-gone")
	kept := newEvidenceFixture(t, ctx, pool, "evidence-kept")
	for _, f := range []evidenceFixture{gone, kept} {
		if _, err := pool.Exec(ctx, insertEvidence, f.ws, f.user, f.token); err != nil {
			t.Fatal(err)
		}
	}
	count := func(ws uuid.UUID) (audits, receipts int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events WHERE workspace_id = $1),
			(SELECT count(*) FROM receipts WHERE workspace_id = $1)`, ws).Scan(&audits, &receipts); err != nil {
			t.Fatal(err)
		}
		return audits, receipts
	}

	// A token, then a user: the audit row stays, without them.
	if _, err := pool.Exec(ctx, `DELETE FROM api_tokens WHERE id = $1`, kept.token); err != nil {
		t.Fatal(err)
	}
	var user, token *uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT actor_user_id, actor_token_id FROM audit_events WHERE workspace_id = $1`, kept.ws).Scan(&user, &token); err != nil {
		t.Fatal(err)
	}
	if token != nil || user == nil || *user != kept.user {
		t.Fatalf("after deleting the token: actor user %v, token %v; want the user, no token", user, token)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, kept.user); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT actor_user_id FROM audit_events WHERE workspace_id = $1`, kept.ws).Scan(&user); err != nil {
		t.Fatal(err)
	}
	if user != nil {
		t.Fatalf("after deleting the user: actor user %v; want none", *user)
	}
	if a, r := count(kept.ws); a != 1 || r != 1 {
		t.Fatalf("the workspace kept %d audit rows and %d receipts; want 1 and 1", a, r)
	}

	// A workspace: its evidence goes with it, and only its.
	if _, err := pool.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, gone.ws); err != nil {
		t.Fatal(err)
	}
	if a, r := count(gone.ws); a != 0 || r != 0 {
		t.Fatalf("a deleted workspace left %d audit rows and %d receipts", a, r)
	}
	if a, r := count(kept.ws); a != 1 || r != 1 {
		t.Fatalf("another workspace's delete took its evidence: %d audit rows, %d receipts", a, r)
	}
}
