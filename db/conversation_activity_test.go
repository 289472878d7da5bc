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
	m, pool := atVersion(t, ctx, conversationActivityMigration-1)
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
// and what follows the feeds' watermarks (messages' primary key, the
// audit log's), whatever the owner's conversations and calls: with 2,000
// conversations, 20,000 calls and 5,000 messages, no sequential scan of
// any of them; and each feed's fold of a span reads the span.
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
	calls := func(n int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `
			WITH p AS (
				INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
				                       rationale, permission_mode, disposition)
				SELECT $1, $2, $3, $2, 'agent', 'records.put', 'mutate', '{}', 'call ' || i, 'auto', 'auto-apply' FROM generate_series(1, $4::int) i
				RETURNING id
			)
			INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, action, subject_type, subject_id, data)
			SELECT $1, 'agent', $2, 'proposal.created', 'proposal', p.id::text, jsonb_build_object('scope', 'conversation', 'scope_id', $3::uuid) FROM p`,
			f.ws, f.user, f.conv, n); err != nil {
			t.Fatal(err)
		}
	}
	calls(20000)
	if _, err := pool.Exec(ctx, `
		INSERT INTO messages (workspace_id, conversation_id, role, content)
		SELECT $1, $2, 'user', 'line ' || i FROM generate_series(1, 5000) i`, f.ws, f.conv); err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	var messagesFolded, callsFolded int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT max(id) FROM messages), (SELECT max(id) FROM audit_events)`).Scan(&messagesFolded, &callsFolded); err != nil {
		t.Fatal(err)
	}
	if _, err := q.FoldConversationMessages(ctx, db.FoldConversationMessagesParams{After: 0, Upto: messagesFolded}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.FoldConversationCalls(ctx, db.FoldConversationCallsParams{After: 0, Upto: callsFolded}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE conversations, conversation_activity, proposals, messages, audit_events`); err != nil {
		t.Fatal(err)
	}
	var partition string
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM audit_events WHERE id = $1`, callsFolded).Scan(&partition); err != nil {
		t.Fatal(err)
	}
	full := []string{"messages", "proposals", "conversations", "conversation_activity", partition}
	calls(3) // after the watermark
	for _, paged := range []bool{false, true} {
		plan := explain(t, ctx, pool, db.ListConversationActivitySQL, f.ws, f.user, paged, time.Now().Add(-time.Hour), uuid.Max, 54)
		if !strings.Contains(plan, "conversation_activity_owner_idx") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("paged %v: the list does not read a page of conversation_activity_owner_idx:\n%s", paged, plan)
		}
	}
	if plan := explain(t, ctx, pool, db.ListConversationTailSQL, f.ws, messagesFolded, callsFolded); scansRows(plan, full...) {
		t.Errorf("what follows the watermarks is not read from their keys:\n%s", plan)
	}
	tail, err := q.ListConversationTail(ctx, db.ListConversationTailParams{WorkspaceID: f.ws, MessagesFolded: messagesFolded, CallsFolded: callsFolded})
	if err != nil || len(tail) != 1 || tail[0].ConversationID != f.conv {
		t.Fatalf("tail: %+v (%v), want the called conversation", tail, err)
	}
	page, err := q.ListConversationActivity(ctx, db.ListConversationActivityParams{WorkspaceID: f.ws, OwnerID: f.user, Lim: 51})
	if err != nil || len(page) != 51 || page[0].Conversation.ID != f.conv {
		t.Fatalf("%d rows (%v); want 51, the called conversation first", len(page), err)
	}
	if plan := explain(t, ctx, pool, db.FoldConversationCallsSQL, callsFolded, callsFolded+10); scansRows(plan, full...) {
		t.Errorf("the calls feed's fold of a span scans a table:\n%s", plan)
	}
	if plan := explain(t, ctx, pool, db.FoldConversationMessagesSQL, messagesFolded, messagesFolded+10); scansRows(plan, full...) {
		t.Errorf("the messages feed's fold of a span scans a table:\n%s", plan)
	}
}

// activityFeedsMigration folds conversations' activity from messages'
// ids and the audit log's.
const activityFeedsMigration = 39

// Up, the activity of conversations written at migration 38 (a message,
// a call, nothing but a change) is what the list showed, the BRIN index is
// gone and each feed starts after the last row; down gives migration 38's
// feed and index back; up again works.
func TestConversationActivityFeedsMigration_UpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, pool := atVersion(t, ctx, activityFeedsMigration-1)
	f := newCallFixture(t, ctx, pool, "activity-feeds")
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var chatty uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO conversations (workspace_id, owner_id, title, updated_at) VALUES ($1, $2, 'chatty', $3) RETURNING id`,
		f.ws, f.user, base).Scan(&chatty); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (workspace_id, conversation_id, role, content, created_at) VALUES ($1, $2, 'user', 'hi', $3)`,
		f.ws, chatty, base.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id) VALUES ($1, 'system', 'settings.changed', 'workspace', $2)`, f.ws, f.ws.String()); err != nil {
		t.Fatal(err)
	}
	// Migration 38's roll-up never ran: its activity has only the
	// conversations' own changes.
	if _, err := pool.Exec(ctx, `UPDATE conversation_activity SET active_at = '2000-01-01'`); err != nil {
		t.Fatal(err)
	}
	var callAt time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at FROM proposals WHERE id = $1`, f.proposal).Scan(&callAt); err != nil {
		t.Fatal(err)
	}
	relations := func() int {
		var n int
		pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'proposals_line_brin'`).Scan(&n)
		return n
	}
	feeds := func() map[string]int64 {
		rows, err := pool.Query(ctx, `SELECT feed, folded_to FROM rollup_feeds WHERE feed NOT IN ('evidence', 'audit_events', 'receipts')`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for rows.Next() {
			var feed string
			var to int64
			rows.Scan(&feed, &to)
			out[feed] = to
		}
		return out
	}
	activity := func(id uuid.UUID) time.Time {
		var at time.Time
		pool.QueryRow(ctx, `SELECT active_at FROM conversation_activity WHERE conversation_id = $1`, id).Scan(&at)
		return at
	}
	for i, step := range []string{"up", "down", "up again"} {
		target := uint(activityFeedsMigration)
		if step == "down" {
			target--
		}
		if err := m.To(target); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !activity(chatty).Equal(base.Add(3*time.Hour)) || !activity(f.conv).Equal(callAt) {
			t.Errorf("%s: activity %s and %s, want the message's %s and the call's %s", step, activity(chatty), activity(f.conv), base.Add(3*time.Hour), callAt)
		}
		var lastMessage, lastAudit, lastLine int64
		pool.QueryRow(ctx, `SELECT (SELECT max(id) FROM messages), (SELECT max(id) FROM audit_events), (SELECT last_value FROM messages_id_seq)`).Scan(&lastMessage, &lastAudit, &lastLine)
		got := feeds()
		if i%2 == 0 {
			if relations() != 0 || len(got) != 2 || got["conversation_messages"] != lastMessage || got["conversation_calls"] != lastAudit {
				t.Errorf("%s: BRIN index %d, feeds %v; want none and the feeds after message %d and audit row %d", step, relations(), got, lastMessage, lastAudit)
			}
		} else if relations() != 1 || len(got) != 1 || got["transcript_lines"] != lastLine {
			t.Errorf("%s: BRIN index %d, feeds %v; want migration 38's", step, relations(), got)
		}
	}
}

// scansRows reports whether a plan reads any of tables sequentially (the
// audit log's other partitions are empty here, and scanned for nothing).
func scansRows(plan string, tables ...string) bool {
	for _, table := range tables {
		if strings.Contains(plan, "Seq Scan on "+table+" ") {
			return true
		}
	}
	return false
}
