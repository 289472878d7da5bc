package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// callFixture is a workspace, its user and their agent token, a
// conversation with one call in it (a proposal), and a guest user.
type callFixture struct{ ws, user, token, conv, proposal, guest uuid.UUID }

func newCallFixture(t *testing.T, ctx context.Context, pool *pgxpool.Pool, slug string) callFixture {
	t.Helper()
	var f callFixture
	err := pool.QueryRow(ctx, `
		WITH w AS (INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id),
		     u AS (INSERT INTO users (email, password_hash) VALUES ($1 || '@example.com', 'x') RETURNING id),
		     g AS (INSERT INTO users (email, password_hash) VALUES ($1 || '-guest@example.com', 'x') RETURNING id),
		     t AS (INSERT INTO api_tokens (workspace_id, user_id, kind, name, token_hash)
		           SELECT w.id, u.id, 'agent', 'a', sha256($1::bytea) FROM w, u RETURNING id),
		     c AS (INSERT INTO conversations (workspace_id, owner_id, title) SELECT w.id, u.id, 'c' FROM w, u RETURNING id),
		     p AS (INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect,
		                                  arguments, rationale, permission_mode, disposition)
		           SELECT w.id, u.id, c.id, u.id, 'agent', 'records.put', 'mutate', '{}', 'a fixture call', 'auto', 'auto-apply'
		           FROM w, u, c RETURNING id)
		SELECT w.id, u.id, t.id, c.id, p.id, g.id FROM w, u, t, c, p, g`, slug).
		Scan(&f.ws, &f.user, &f.token, &f.conv, &f.proposal, &f.guest)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// atVersion is a database of the test's own, migrated to version: the
// state a migration's test writes its data in, before migrating up and
// down with the returned migrator; both close when the test ends.
func atVersion(t *testing.T, ctx context.Context, version uint) (*db.Migrator, *pgxpool.Pool) {
	t.Helper()
	url := dbtest.MustURL(t)
	m, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.To(version); err != nil {
		t.Fatal(err)
	}
	pool, err := db.NewPool(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return m, pool
}

// writeAlongside writes what is written with a call besides its proposal:
// its audit row and its receipt (its transcript line is the call itself,
// migration 34); and a guest's chat
// line in the same conversation.
const writeAlongside = `
	WITH a AS (
		INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id)
		VALUES ($1, 'agent', $2, $3, 'proposal.created', 'proposal', $5::uuid::text)
	), r AS (
		INSERT INTO receipts (workspace_id, kind, proposal_id, content, content_hash, metadata)
		VALUES ($1, 'execution', $5, '{}', sha256('{}'::bytea), '{}')
	)
	INSERT INTO messages (workspace_id, conversation_id, role, content, author_user_id) VALUES ($1, $4, 'user', 'hello', $6)`

// The rows written with a call besides its proposal (audit rows, receipt,
// transcript line) lock nothing they name: while another transaction
// holds the workspace, user, token, conversation and proposal rows FOR
// UPDATE, they are written at once. With foreign keys, each would wait
// for those rows (KEY SHARE), as every concurrent call did on its
// workspace's, user's, token's and conversation's rows (migrations 22, 23).
func TestCallRows_LockNothingTheyName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "call-rows-locks")

	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `
		SELECT 1 FROM workspaces w, users u, users g, api_tokens t, conversations c, proposals p
		WHERE w.id = $1 AND u.id = $2 AND t.id = $3 AND c.id = $4 AND p.id = $5 AND g.id = $6 FOR UPDATE`,
		f.ws, f.user, f.token, f.conv, f.proposal, f.guest); err != nil {
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
	if _, err := writer.Exec(ctx, writeAlongside, f.ws, f.user, f.token, f.conv, f.proposal, f.guest); err != nil {
		t.Fatalf("a row written with a call waited on a row it names: %v", err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Deleting what those rows name does what the foreign keys did: a
// workspace takes its audit rows and receipts, a conversation or a
// proposal its transcript lines; a deleted user or token is cleared from
// the rows that named it.
func TestCallRows_FollowDeletesOfWhatTheyName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	gone := newCallFixture(t, ctx, pool, "call-rows-gone")
	kept := newCallFixture(t, ctx, pool, "call-rows-kept")
	for _, f := range []callFixture{gone, kept} {
		if _, err := pool.Exec(ctx, writeAlongside, f.ws, f.user, f.token, f.conv, f.proposal, f.guest); err != nil {
			t.Fatal(err)
		}
	}
	type counts struct{ audits, receipts, toolLines, userLines int }
	count := func(f callFixture) (c counts) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events WHERE workspace_id = $1),
			(SELECT count(*) FROM receipts WHERE workspace_id = $1),
			(SELECT count(*) FROM transcript_lines WHERE conversation_id = $2 AND role = 'tool'),
			(SELECT count(*) FROM messages WHERE conversation_id = $2 AND role = 'user')`, f.ws, f.conv).
			Scan(&c.audits, &c.receipts, &c.toolLines, &c.userLines); err != nil {
			t.Fatal(err)
		}
		return c
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// A token, then a guest: the rows stay, without them.
	exec(`DELETE FROM api_tokens WHERE id = $1`, kept.token)
	exec(`DELETE FROM users WHERE id = $1`, kept.guest)
	var token, author *uuid.UUID
	var actor uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT actor_user_id, actor_token_id, (SELECT author_user_id FROM messages WHERE conversation_id = $2 AND role = 'user')
		FROM audit_events WHERE workspace_id = $1`, kept.ws, kept.conv).Scan(&actor, &token, &author); err != nil {
		t.Fatal(err)
	}
	if token != nil || author != nil || actor != kept.user {
		t.Fatalf("after deleting the token and the guest: actor %v, token %v, line author %v; want the user alone", actor, token, author)
	}
	if c := count(kept); c != (counts{1, 1, 1, 1}) {
		t.Fatalf("after deleting the token and the guest: %+v; want every row kept", c)
	}

	// A proposal takes its line with it; the conversation keeps the others.
	exec(`DELETE FROM proposals WHERE id = $1`, kept.proposal)
	if c := count(kept); c != (counts{1, 1, 0, 1}) {
		t.Fatalf("after deleting the proposal: %+v; want its line gone, the rest kept", c)
	}
	// A conversation takes its lines.
	exec(`DELETE FROM conversations WHERE id = $1`, kept.conv)
	if c := count(kept); c != (counts{1, 1, 0, 0}) {
		t.Fatalf("after deleting the conversation: %+v; want its lines gone, the evidence kept", c)
	}
	// A user clears their actor id from the audit rows.
	exec(`DELETE FROM users WHERE id = $1`, kept.user)
	var actorAfter *uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT actor_user_id FROM audit_events WHERE workspace_id = $1`, kept.ws).Scan(&actorAfter); err != nil {
		t.Fatal(err)
	}
	if actorAfter != nil {
		t.Fatalf("after deleting the user: actor %v; want none", *actorAfter)
	}

	// A workspace: everything of it goes, and only of it.
	exec(`DELETE FROM workspaces WHERE id = $1`, gone.ws)
	if c := count(gone); c != (counts{}) {
		t.Fatalf("a deleted workspace left %+v", c)
	}
	if c := count(kept); c != (counts{1, 1, 0, 0}) {
		t.Fatalf("another workspace's delete took rows of this one: %+v", c)
	}
}

// A call's proposal and the record it writes lock neither the token, the
// person who resolved it nor the workspace (migration 31): while another
// transaction holds those rows FOR UPDATE, they are written at once. Only
// the scope key (migration 24) still checks a row: the conversation.
func TestCallRows_ProposalAndRecordLockNoTokenUserOrWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "call-parents-unlocked")

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
	if _, err := writer.Exec(ctx, `
		WITH p AS (
			INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_token_id, resolved_by_user_id,
			                       proposed_by_kind, tool, effect, arguments, rationale, permission_mode, disposition)
			VALUES ($1, $2, $3, $2, $4, $2, 'agent', 'records.put', 'mutate', '{}', 'a call', 'auto', 'auto-apply')
		)
		INSERT INTO records (workspace_id, collection, key, value) VALUES ($1, 'c', 'k', '{}')`, f.ws, f.user, f.conv, f.token); err != nil {
		t.Fatalf("a call's proposal or record waited on its token, user or workspace: %v", err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Deleting a token or the user who resolved a call clears them from the
// call, as the keys' ON DELETE SET NULL did; deleting a workspace takes
// its records, and only its own.
func TestCallRows_ProposalAndRecordFollowDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "call-parents-deletes")
	other := newCallFixture(t, ctx, pool, "call-parents-other")
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The guest resolved the call; the token proposed it.
	exec(`UPDATE proposals SET proposed_by_token_id = $2, resolved_by_user_id = $3 WHERE id = $1`, f.proposal, f.token, f.guest)
	for _, g := range []callFixture{f, other} {
		exec(`INSERT INTO records (workspace_id, collection, key, value) VALUES ($1, 'c', 'k', '{}')`, g.ws)
	}

	exec(`DELETE FROM api_tokens WHERE id = $1`, f.token)
	exec(`DELETE FROM users WHERE id = $1`, f.guest)
	var token, resolver *uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT proposed_by_token_id, resolved_by_user_id FROM proposals WHERE id = $1`, f.proposal).
		Scan(&token, &resolver); err != nil {
		t.Fatal(err)
	}
	if token != nil || resolver != nil {
		t.Fatalf("after deleting the token and the resolver: token %v, resolver %v; want both cleared", token, resolver)
	}

	exec(`DELETE FROM workspaces WHERE id = $1`, f.ws)
	records := func(ws uuid.UUID) (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM records WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := records(f.ws); n != 0 {
		t.Fatalf("a deleted workspace left %d records", n)
	}
	if n := records(other.ws); n != 1 {
		t.Fatalf("another workspace's delete took this one's records: %d left", n)
	}
}
