package conversations_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// listFixture is a workspace with an owner, another member, and the
// owner's conversations, each given lines at chosen times.
type listFixture struct {
	pool         *pgxpool.Pool
	svc          *conversations.Service
	owner, other auth.Principal
}

func newListFixture(t *testing.T) listFixture {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := listFixture{pool: pool, svc: conversations.NewService(pool)}
	err := pool.QueryRow(ctx, `
		WITH w AS (INSERT INTO workspaces (slug, name) VALUES ('list', 'list') RETURNING id),
		     u AS (INSERT INTO users (email, password_hash) VALUES ('owner@example.com', 'x'), ('other@example.com', 'x') RETURNING id, email),
		     m AS (INSERT INTO workspace_members (workspace_id, user_id, role) SELECT w.id, u.id, 'member' FROM w, u RETURNING 1)
		SELECT w.id, (SELECT id FROM u WHERE email = 'owner@example.com'), (SELECT id FROM u WHERE email = 'other@example.com') FROM w`).
		Scan(&f.owner.WorkspaceID, &f.owner.UserID, &f.other.UserID)
	if err != nil {
		t.Fatal(err)
	}
	f.other.WorkspaceID = f.owner.WorkspaceID
	f.owner.Role, f.other.Role = auth.RoleMember, auth.RoleMember
	return f
}

// conversation makes one of p's conversations, last changed at changed.
func (f listFixture) conversation(t *testing.T, p auth.Principal, title string, changed time.Time) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := f.pool.QueryRow(context.Background(), `INSERT INTO conversations (workspace_id, owner_id, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) RETURNING id`, p.WorkspaceID, p.UserID, title, changed).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// message writes a line in conv at at; call writes a call (its own line).
func (f listFixture) message(t *testing.T, conv uuid.UUID, at time.Time) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO messages (workspace_id, conversation_id, role, content, created_at)
		SELECT workspace_id, id, 'user', 'hello', $2 FROM conversations WHERE id = $1`, conv, at); err != nil {
		t.Fatal(err)
	}
}

func (f listFixture) call(t *testing.T, conv uuid.UUID, at time.Time) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), callSQL, conv, at); err != nil {
		t.Fatal(err)
	}
}

// callSQL writes a call as the service does: its proposal and, as it ran
// at once, its one audit row (proposal.applied), which names its scope.
// (A call that waits writes proposal.created, which names it too:
// db/conversation_activity_test.go.)
const callSQL = `
	WITH p AS (
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
		                       rationale, permission_mode, disposition, created_at)
		SELECT workspace_id, owner_id, id, owner_id, 'agent', 'records.put', 'mutate', '{}', 'a call', 'auto', 'auto-apply', $2
		FROM conversations WHERE id = $1
		RETURNING id, workspace_id, owner_id, conversation_id, created_at
	)
	INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, action, subject_type, subject_id, data, created_at)
	SELECT workspace_id, 'agent', owner_id, 'proposal.applied', 'proposal', id::text,
	       jsonb_build_object('tool', 'records.put', 'scope', 'conversation', 'scope_id', conversation_id, 'path', 'auto'), created_at
	FROM p`

// foldAll takes turns of the lines' roll-up until it has nothing left.
func (f listFixture) foldAll(t *testing.T) {
	t.Helper()
	for range 20 {
		busy := false
		for _, step := range f.svc.RollUps() {
			p, err := step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			busy = busy || p.More || p.Moved
		}
		if !busy {
			return
		}
	}
}

// all reads every page of p's list, limit at a time.
func (f listFixture) all(t *testing.T, p auth.Principal, limit int) ([]uuid.UUID, int) {
	t.Helper()
	var ids []uuid.UUID
	pages, before := 0, ""
	for {
		page, err := f.svc.List(context.Background(), p, conversations.ListPage{Limit: limit, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, c := range page.Conversations {
			ids = append(ids, c.ID)
		}
		if page.Next == "" {
			return ids, pages
		}
		if pages > 100 {
			t.Fatal("the pages do not end")
		}
		before = page.Next
	}
}

// The list orders the owner's conversations by their activity (the later
// of their own last change and their last line, a message or a call),
// whether the lines are folded into conversation_activity yet or not,
// and reads every one exactly once a page at a time.
func TestList_OrdersByActivityFoldedOrNot(t *testing.T) {
	t.Parallel()
	f := newListFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	hour := func(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }
	quiet := f.conversation(t, f.owner, "quiet, changed at 5", hour(5))
	chatty := f.conversation(t, f.owner, "a message at 9", hour(0))
	f.message(t, chatty, hour(9))
	called := f.conversation(t, f.owner, "a call at 7", hour(1))
	f.call(t, called, hour(7))
	old := f.conversation(t, f.owner, "a message at 2", hour(0))
	f.message(t, old, hour(2))
	f.conversation(t, f.other, "someone else's, at 10", hour(10))
	want := []uuid.UUID{chatty, called, quiet, old}

	for _, folded := range []bool{false, true} {
		if folded {
			f.foldAll(t)
		}
		page, err := f.svc.List(context.Background(), f.owner, conversations.ListPage{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var got []uuid.UUID
		for _, c := range page.Conversations {
			got = append(got, c.ID)
		}
		if !slices.Equal(got, want) || page.Next != "" {
			t.Fatalf("folded %v: %v (next %q), want %v", folded, got, page.Next, want)
		}
		if at := page.Conversations[0].UpdatedAt; !at.Equal(hour(9)) {
			t.Errorf("folded %v: the first conversation's activity is %s, want its message's time %s", folded, at, hour(9))
		}
		for _, limit := range []int{1, 3} {
			if ids, pages := f.all(t, f.owner, limit); !slices.Equal(ids, want) || pages != (len(want)+limit-1)/limit {
				t.Errorf("folded %v, %d a page: %v in %d pages, want %v", folded, limit, ids, pages, want)
			}
		}
	}

	// A new line moves its conversation up before the roll-up folds it.
	f.call(t, old, hour(11))
	if ids, _ := f.all(t, f.owner, 2); !slices.Equal(ids, []uuid.UUID{old, chatty, called, quiet}) {
		t.Errorf("after a new call in the oldest: %v", ids)
	}
	f.foldAll(t)
	if ids, _ := f.all(t, f.owner, 2); !slices.Equal(ids, []uuid.UUID{old, chatty, called, quiet}) {
		t.Errorf("folded, after a new call in the oldest: %v", ids)
	}
	// A renamed conversation is active when it was renamed.
	if _, err := f.pool.Exec(context.Background(), `UPDATE conversations SET title = 'renamed', updated_at = $2 WHERE id = $1`, quiet, hour(12)); err != nil {
		t.Fatal(err)
	}
	if ids, _ := f.all(t, f.owner, 3); !slices.Equal(ids, []uuid.UUID{quiet, old, chatty, called}) {
		t.Errorf("after a rename: %v", ids)
	}
	// A deleted conversation leaves the list and its activity row.
	if _, err := f.pool.Exec(context.Background(), `DELETE FROM conversations WHERE id = $1`, chatty); err != nil {
		t.Fatal(err)
	}
	if ids, _ := f.all(t, f.owner, 3); !slices.Equal(ids, []uuid.UUID{quiet, old, called}) {
		t.Errorf("after a delete: %v", ids)
	}
	var rows int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM conversation_activity WHERE conversation_id = $1`, chatty).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the deleted conversation's activity: %d rows (%v)", rows, err)
	}
}

// A call whose transaction commits after a later one's is folded all
// the same: the roll-up waits for every transaction that was writing the
// audit log when it read the newest id.
func TestList_ALateCommitIsFolded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newListFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	early := f.conversation(t, f.owner, "early", base)
	late := f.conversation(t, f.owner, "late", base.Add(time.Minute))
	f.foldAll(t)

	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Its audit row's id is drawn now, its commit comes after the next
	// call's.
	if _, err := tx.Exec(ctx, callSQL, early, base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.call(t, late, base.Add(30*time.Minute))
	f.foldAll(t)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f.foldAll(t)
	var folded int64
	if err := f.pool.QueryRow(ctx, `SELECT folded_to FROM rollup_feeds WHERE feed = 'conversation_calls'`).Scan(&folded); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	if err := f.pool.QueryRow(ctx, `SELECT active_at FROM conversation_activity WHERE conversation_id = $1`, early).Scan(&at); err != nil || !at.Equal(base.Add(time.Hour)) {
		t.Errorf("the late call's conversation is active at %s (%v), want %s", at, err, base.Add(time.Hour))
	}
	var row int64
	if err := f.pool.QueryRow(ctx, `SELECT max(id) FROM audit_events`).Scan(&row); err != nil || folded < row {
		t.Errorf("folded to %d, the late call's audit row is %d (%v)", folded, row, err)
	}
	if ids, _ := f.all(t, f.owner, 1); !slices.Equal(ids, []uuid.UUID{early, late}) {
		t.Errorf("list: %v", ids)
	}
}

// Behind a roll-up that stalled (more unfolded rows than the list's fast
// path reads: other conversations' lines, another member's), a new line
// still moves its conversation up: the list reads the whole tail.
func TestList_BehindAStalledRollUpStillSeesTheLatestLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newListFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	first := f.conversation(t, f.owner, "first", base)
	second := f.conversation(t, f.owner, "second", base.Add(time.Minute))
	busy := f.conversation(t, f.other, "someone else's, busy", base)
	f.foldAll(t)
	for _, step := range []struct {
		name string
		many string // more lines than the fast path reads, in busy
		one  func() // then one line in one of the owner's
		want []uuid.UUID
	}{
		{"a message", `INSERT INTO messages (workspace_id, conversation_id, role, content, created_at)
			SELECT workspace_id, id, 'user', 'hello', $2 FROM conversations, generate_series(1, 2100) WHERE id = $1`,
			func() { f.message(t, first, base.Add(time.Hour)) }, []uuid.UUID{first, second}},
		{"a call", `INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, action, subject_type, subject_id, data, created_at)
			SELECT workspace_id, 'agent', owner_id, 'proposal.applied', 'proposal', gen_random_uuid()::text,
			       jsonb_build_object('tool', 'records.put', 'scope', 'conversation', 'scope_id', id, 'path', 'auto'), $2
			FROM conversations, generate_series(1, 2100) WHERE id = $1`,
			func() { f.call(t, second, base.Add(2*time.Hour)) }, []uuid.UUID{second, first}},
	} {
		if _, err := f.pool.Exec(ctx, step.many, busy, base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		step.one()
		if ids, _ := f.all(t, f.owner, 1); !slices.Equal(ids, step.want) {
			t.Errorf("after %s, unfolded: %v, want %v", step.name, ids, step.want)
		}
		f.foldAll(t)
		if ids, _ := f.all(t, f.owner, 1); !slices.Equal(ids, step.want) {
			t.Errorf("after %s, folded: %v, want %v", step.name, ids, step.want)
		}
	}
}

// A limit out of range and a cursor that is not one this list gave this
// caller are refused, naming the parameter; nothing is read.
func TestList_RefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newListFixture(t)
	for i := range 3 {
		f.conversation(t, f.owner, "c", time.Date(2026, 11, 1, i, 0, 0, 0, time.UTC))
	}
	page, err := f.svc.List(ctx, f.owner, conversations.ListPage{Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v (%v)", page, err)
	}
	altered := []byte(page.Next)
	altered[5] ^= 1
	if altered[5] == '-' || altered[5] == '_' {
		altered[5] = 'A'
	}
	for name, c := range map[string]struct {
		p     auth.Principal
		page  conversations.ListPage
		field string
	}{
		"limit 0":             {f.owner, conversations.ListPage{Limit: 0}, "limit"},
		"limit 201":           {f.owner, conversations.ListPage{Limit: conversations.MaxListLimit + 1}, "limit"},
		"altered cursor":      {f.owner, conversations.ListPage{Limit: 1, Before: string(altered)}, "before"},
		"another's cursor":    {f.other, conversations.ListPage{Limit: 1, Before: page.Next}, "before"},
		"not a cursor":        {f.owner, conversations.ListPage{Limit: 1, Before: "yesterday"}, "before"},
		"a transcript cursor": {f.owner, conversations.ListPage{Limit: 1, Before: "AW8AAAAAAAAAAQAAAAAAAAAAAAAA"}, "before"},
	} {
		_, err := f.svc.List(ctx, c.p, c.page)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.EINVALID || len(ae.Fields) != 1 || ae.Fields[0].Field != c.field {
			t.Errorf("%s: %v, want EINVALID naming %s", name, err, c.field)
		}
	}
}
