package db_test

import (
	"context"
	"testing"
)

// transcriptLinesMigration is the migration that made a conversation's
// calls their own transcript lines.
const transcriptLinesMigration = 34

// A transcript written before the migration (words, tool lines, a
// notebook's call that has none) reads the same after it, line for line
// (positions, roles, contents, calls), with no tool line left in
// messages; and the down migration gives the tool lines back as they
// were.
func TestTranscriptLinesMigration_TheTranscriptReadsTheSameUpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, pool := atVersion(t, ctx, transcriptLinesMigration-1)
	f := newCallFixture(t, ctx, pool, "transcript-lines")
	// Words and calls, each call with its tool line, as before.
	if _, err := pool.Exec(ctx, `
		WITH calls AS (
			INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
			                       rationale, permission_mode, disposition)
			SELECT $1, $2, $3, $2, 'agent', 'records.put', 'mutate', '{}', 'call ' || i, 'auto', 'auto-apply' FROM generate_series(1, 3) i
			RETURNING id
		)
		INSERT INTO messages (workspace_id, conversation_id, role, content, proposal_id, author_user_id)
		SELECT $1, $3, 'tool', 'records.put', id, $2 FROM calls`, f.ws, f.user, f.conv); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (workspace_id, conversation_id, role, content, author_user_id) VALUES ($1, $3, 'user', 'hello', $2)`,
		f.ws, f.user, f.conv); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (workspace_id, conversation_id, role, content, proposal_id, author_user_id) VALUES ($1, $3, 'tool', 'records.put', $4, $2)`,
		f.ws, f.user, f.conv, f.proposal); err != nil {
		t.Fatal(err)
	}
	type line struct {
		ID       int64
		Role     string
		Content  string
		Proposal string
	}
	read := func(from string) []line {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT id, role::text, content::text, coalesce(proposal_id::text, '') FROM `+from+
			` WHERE workspace_id = $1 AND conversation_id = $2 ORDER BY id`, f.ws, f.conv)
		if err != nil {
			t.Fatal(err)
		}
		var out []line
		for rows.Next() {
			var l line
			if err := rows.Scan(&l.ID, &l.Role, &l.Content, &l.Proposal); err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	before := read("messages")
	if len(before) != 5 {
		t.Fatalf("%d lines before", len(before))
	}

	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if after := read("transcript_lines"); !equalLines(before, after) {
		t.Fatalf("after up:\n%v\nwant\n%v", after, before)
	}
	var toolRows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE role = 'tool'`).Scan(&toolRows); err != nil || toolRows != 0 {
		t.Fatalf("%d tool lines left in messages (%v)", toolRows, err)
	}
	// A new call is a line after them, with no message written.
	if _, err := pool.Exec(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
		                       rationale, permission_mode, disposition)
		VALUES ($1, $2, $3, $2, 'agent', 'records.get', 'read', '{}', 'a new call', 'auto', 'auto-run')`, f.ws, f.user, f.conv); err != nil {
		t.Fatal(err)
	}
	after := read("transcript_lines")
	if len(after) != 6 || after[5].Content != "records.get" || after[5].Role != "tool" || after[5].ID <= before[4].ID {
		t.Fatalf("the new call's line: %v", after)
	}

	if err := m.To(transcriptLinesMigration - 1); err != nil {
		t.Fatal(err)
	}
	if down := read("messages"); !equalLines(after, down) {
		t.Fatalf("after down:\n%v\nwant\n%v", down, after)
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if again := read("transcript_lines"); !equalLines(after, again) {
		t.Fatalf("up again:\n%v\nwant\n%v", again, after)
	}
}

func equalLines[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
