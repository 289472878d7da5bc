package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// conversationActivityMigration keeps conversations' activity in a table.
const conversationActivityMigration = 38

// Conversations written before the migration (one with a message, one
// with a call, one with nothing but its own change) have the activity the
// list gave them before: the later of their change and their last line;
// the lines' feed starts after every line written; the down migration
// takes it all away, and up again puts it back.
func TestConversationActivityMigration_KeepsTheListsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.MustURL(t)
	m, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.To(conversationActivityMigration - 1); err != nil {
		t.Fatal(err)
	}
	pool, err := db.NewPool(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	f := newCallFixture(t, ctx, pool, "conversation-activity")
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var quiet, chatty uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO conversations (workspace_id, owner_id, title, updated_at) VALUES ($1, $2, 'quiet', $3) RETURNING id`,
		f.ws, f.user, base.Add(2*time.Hour)).Scan(&quiet); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO conversations (workspace_id, owner_id, title, updated_at) VALUES ($1, $2, 'chatty', $3) RETURNING id`,
		f.ws, f.user, base).Scan(&chatty); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (workspace_id, conversation_id, role, content, created_at) VALUES ($1, $2, 'user', 'hi', $3)`,
		f.ws, chatty, base.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The fixture's conversation has its call (created now).
	var callAt time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at FROM proposals WHERE id = $1`, f.proposal).Scan(&callAt); err != nil {
		t.Fatal(err)
	}
	want := map[uuid.UUID]time.Time{quiet: base.Add(2 * time.Hour), chatty: base.Add(3 * time.Hour), f.conv: callAt}

	check := func(step string) {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT conversation_id, active_at FROM conversation_activity WHERE workspace_id = $1`, f.ws)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := map[uuid.UUID]time.Time{}
		for rows.Next() {
			var id uuid.UUID
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				t.Fatal(err)
			}
			got[id] = at
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d activity rows, want %d", step, len(got), len(want))
		}
		for id, at := range want {
			if !got[id].Equal(at) {
				t.Errorf("%s: %s is active at %s, want %s", step, id, got[id], at)
			}
		}
		var folded, last int64
		if err := pool.QueryRow(ctx, `SELECT f.folded_to, (SELECT last_value FROM messages_id_seq) FROM rollup_feeds f WHERE f.feed = 'transcript_lines'`).
			Scan(&folded, &last); err != nil || folded != last {
			t.Errorf("%s: the lines' feed starts at %d (%v), want after the last line, %d", step, folded, err, last)
		}
	}
	if err := m.To(conversationActivityMigration); err != nil {
		t.Fatal(err)
	}
	check("up")
	if err := m.To(conversationActivityMigration - 1); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ('conversation_activity', 'proposals_line_brin')`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("down: %d of the migration's relations left (%v)", tables, err)
	}
	if err := m.To(conversationActivityMigration); err != nil {
		t.Fatal(err)
	}
	check("up again")
}

// The conversations list reads a page of conversation_activity's index
// and the lines after the feed's watermark (messages' primary key, the
// calls' BRIN index), whatever the owner's conversations and lines: with
// 2,000 conversations, 20,000 calls and 5,000 messages, no sequential
// scan of any of them; and the roll-up's fold of a span reads the span.
func TestConversationsList_ReadsAPageOfItsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "conversations-list")
	if _, err := pool.Exec(ctx, `
		INSERT INTO conversations (workspace_id, owner_id, title, updated_at)
		SELECT $1, $2, 'c' || i, now() - i * interval '1 minute' FROM generate_series(1, 2000) i`, f.ws, f.user); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
		                       rationale, permission_mode, disposition)
		SELECT $1, $2, $3, $2, 'agent', 'records.put', 'mutate', '{}', 'call ' || i, 'auto', 'auto-apply' FROM generate_series(1, 20000) i`,
		f.ws, f.user, f.conv); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO messages (workspace_id, conversation_id, role, content)
		SELECT $1, $2, 'user', 'line ' || i FROM generate_series(1, 5000) i`, f.ws, f.conv); err != nil {
		t.Fatal(err)
	}
	var folded int64
	if err := pool.QueryRow(ctx, `SELECT last_value FROM messages_id_seq`).Scan(&folded); err != nil {
		t.Fatal(err)
	}
	if _, err := db.New(pool).FoldConversationActivity(ctx, db.FoldConversationActivityParams{After: 0, Upto: folded}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE conversations, conversation_activity, proposals, messages`); err != nil {
		t.Fatal(err)
	}
	// A few lines after the watermark.
	if _, err := pool.Exec(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
		                       rationale, permission_mode, disposition)
		SELECT $1, $2, $3, $2, 'agent', 'records.get', 'read', '{}', 'a new call', 'auto', 'auto-run' FROM generate_series(1, 3)`,
		f.ws, f.user, f.conv); err != nil {
		t.Fatal(err)
	}
	for _, paged := range []bool{false, true} {
		plan := explain(t, ctx, pool, db.ListConversationActivitySQL, f.ws, f.user, paged, time.Now().Add(-time.Hour), uuid.Max, 54)
		if !strings.Contains(plan, "conversation_activity_owner_idx") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("paged %v: the list does not read a page of conversation_activity_owner_idx:\n%s", paged, plan)
		}
	}
	if plan := explain(t, ctx, pool, db.ListConversationTailSQL, f.ws, folded, f.user); strings.Contains(plan, "Seq Scan") {
		t.Errorf("the lines after the watermark are not read from their indexes:\n%s", plan)
	}
	q := db.New(pool)
	tail, err := q.ListConversationTail(ctx, db.ListConversationTailParams{WorkspaceID: f.ws, OwnerID: f.user, Folded: folded})
	if err != nil || len(tail) != 1 || tail[0].ConversationID != f.conv {
		t.Fatalf("tail: %+v (%v), want the called conversation", tail, err)
	}
	page, err := q.ListConversationActivity(ctx, db.ListConversationActivityParams{WorkspaceID: f.ws, OwnerID: f.user, Lim: 51})
	if err != nil || len(page) != 51 || page[0].Conversation.ID != f.conv {
		t.Fatalf("%d rows (%v); want 51, the called conversation first", len(page), err)
	}
	if plan := explain(t, ctx, pool, db.FoldConversationActivitySQL, folded, folded+10); strings.Contains(plan, "Seq Scan on proposals") || strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("the fold of a span scans a table:\n%s", plan)
	}
}
