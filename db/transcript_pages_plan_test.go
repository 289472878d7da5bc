package db_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// A conversation's page, its live feed, the REST list and a model turn's
// context read ranges of indexes with a LIMIT, not the conversation's
// history (migration 27; the page of a conversation of 200k calls took
// 49 s): with a conversation of 30,000 lines and 20,000 calls among
// 30,000 lines of 1,000 other conversations, no plan scans messages or
// proposals sequentially or sorts, for the hot conversation and a quiet
// one, for the first calls (the values known) and for a prepared
// statement's generic plan.
func TestTranscriptPages_ReadThroughIndexesWithALimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "transcript-pages")
	if _, err := pool.Exec(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_token_id, proposed_by_kind,
		                       tool, effect, arguments, rationale, permission_mode, disposition, status, created_at)
		SELECT $1, $2, $3, $2, $4, 'agent', 'records.put', 'mutate', '{}', 'an applied call', 'auto', 'auto-apply',
		       CASE WHEN i <= 3 THEN 'pending' ELSE 'applied' END, now() - i * interval '1 second'
		FROM generate_series(1, 20000) i`, f.ws, f.user, f.conv, f.token); err != nil {
		t.Fatal(err)
	}
	// The hot conversation's lines (its calls', then words) interleaved
	// with the lines of 1,000 quiet ones (no key: migration 23); a call's
	// line is the call itself, at its position (migration 37).
	if _, err := pool.Exec(ctx, `
		WITH hot AS (
		    SELECT row_number() OVER (ORDER BY created_at, id) AS n, id FROM proposals WHERE conversation_id = $1
		), placed AS (
		    UPDATE proposals p SET line_id = 2 * h.n FROM hot h WHERE p.id = h.id
		), lines AS (
		    SELECT 2 * i AS n, $1::uuid AS conversation_id, 'line ' || i AS content
		    FROM generate_series(1, 30000) i LEFT JOIN hot h ON h.n = i WHERE h.id IS NULL
		    UNION ALL
		    SELECT 2 * i + 1, ('00000000-0000-7000-8000-' || lpad((i % 1000)::text, 12, '0'))::uuid, 'quiet ' || i
		    FROM generate_series(1, 30000) i
		)
		INSERT INTO messages (id, workspace_id, conversation_id, role, content, author_user_id) OVERRIDING SYSTEM VALUE
		SELECT n, $3, conversation_id, 'assistant', content, $2 FROM lines`, f.conv, f.user, f.ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT setval('messages_id_seq', 100000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE messages, proposals`); err != nil {
		t.Fatal(err)
	}
	quiet := uuid.MustParse("00000000-0000-7000-8000-000000000007")
	var ids []string
	rows, err := pool.Query(ctx, `SELECT id::text FROM proposals WHERE conversation_id = $1 ORDER BY created_at DESC LIMIT 50`, f.conv)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != 50 {
		t.Fatalf("%d ids (%v)", len(ids), rows.Err())
	}
	idArray := "{" + strings.Join(ids, ",") + "}" // as text: the simple protocol of explainGeneric
	var mid int64
	if err := pool.QueryRow(ctx, `SELECT id FROM transcript_lines WHERE workspace_id = $1 AND conversation_id = $2 ORDER BY id OFFSET 15000 LIMIT 1`, f.ws, f.conv).Scan(&mid); err != nil {
		t.Fatal(err)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct {
		name, file, index string
		args              []any
		limit             bool
	}{
		{"ListMessagesBefore", "messages.sql.go", "proposals_conversation_idx", []any{f.ws, f.conv, int64(math.MaxInt64), 51}, true},
		{"ListMessagesBefore", "messages.sql.go", "proposals_conversation_idx", []any{f.ws, f.conv, mid, 51}, true},
		{"ListMessagesBefore", "messages.sql.go", "messages_conversation_idx", []any{f.ws, quiet, mid, 51}, true},
		{"ListMessagesBetween", "messages.sql.go", "proposals_conversation_idx", []any{f.ws, f.conv, mid, int64(math.MaxInt64), 51}, true},
		{"ListMessagesBetween", "messages.sql.go", "proposals_conversation_idx", []any{f.ws, f.conv, int64(0), int64(math.MaxInt64), 51}, true},
		{"ListMessagesBetween", "messages.sql.go", "messages_conversation_idx", []any{f.ws, quiet, mid, int64(math.MaxInt64), 51}, true},
		{"PreviousMessageID", "messages.sql.go", "proposals_conversation_idx", []any{f.ws, f.conv, mid}, true},
		{"PreviousMessageID", "messages.sql.go", "messages_conversation_idx", []any{f.ws, quiet, mid}, true},
		{"NextMessageID", "messages.sql.go", "proposals_conversation_idx", []any{f.ws, f.conv, mid}, true},
		{"NextMessageID", "messages.sql.go", "messages_conversation_idx", []any{f.ws, quiet, mid}, true},
		{"ListConversationCards", "proposals.sql.go", "proposals_pkey", []any{idArray, f.ws, f.conv, 500}, true},
		{"ListOpenInConversation", "proposals.sql.go", "proposals_conversation_open_idx", []any{f.ws, f.conv, 20}, true},
	} {
		sql := generatedSQL(t, c.file, c.name)
		for _, plan := range []struct{ when, text string }{
			{"first calls", explain(t, ctx, conn.Conn(), sql, c.args...)},
			{"generic plan", explainGeneric(t, ctx, conn.Conn(), sql, c.args...)},
		} {
			if !strings.Contains(plan.text, "Index") || !strings.Contains(plan.text, c.index) {
				t.Errorf("%s, %s: the plan does not read through %s:\n%s", c.name, plan.when, c.index, plan.text)
			}
			// A quiet conversation's few lines may be sorted after an index
			// range; the hot one's never.
			// (A Merge Append of the messages' and the calls' ranges names
			// its "Sort Key"; a Sort node is what reads everything.)
			sorted := sortNode.MatchString(plan.text) && c.args[1] != quiet
			if strings.Contains(plan.text, "Seq Scan on messages") || strings.Contains(plan.text, "Seq Scan on proposals") || sorted {
				t.Errorf("%s, %s: the plan reads the conversation's history:\n%s", c.name, plan.when, plan.text)
			}
			if c.limit && !strings.Contains(plan.text, "Limit") {
				t.Errorf("%s, %s: the plan does not stop at a limit:\n%s", c.name, plan.when, plan.text)
			}
		}
	}
	// And they answer.
	q := db.New(pool)
	latest, err := q.ListMessagesBefore(ctx, db.ListMessagesBeforeParams{WorkspaceID: f.ws, ConversationID: f.conv, Before: math.MaxInt64, MaxLines: 51})
	if err != nil || len(latest) != 51 || latest[0].Content != "line 30000" {
		t.Fatalf("latest lines: %d (%v)", len(latest), err)
	}
	open, err := q.ListOpenInConversation(ctx, db.ListOpenInConversationParams{WorkspaceID: f.ws, ConversationID: uuid.NullUUID{UUID: f.conv, Valid: true}, MaxCalls: 20})
	if err != nil || len(open) != 4 { // the fixture's call and three of these
		t.Fatalf("waiting calls: %d (%v), want 4", len(open), err)
	}
	var pids []uuid.UUID
	for _, id := range ids {
		pids = append(pids, uuid.MustParse(id))
	}
	cards, err := q.ListConversationCards(ctx, db.ListConversationCardsParams{Ids: pids, WorkspaceID: f.ws, ConversationID: uuid.NullUUID{UUID: f.conv, Valid: true}, MaxCards: 500})
	if err != nil || len(cards) != 50 {
		t.Fatalf("cards: %d (%v), want 50", len(cards), err)
	}
	for _, c := range cards {
		// The fixture's own call has no token; the others name theirs.
		if c.ProposerEmail != "transcript-pages@example.com" || (c.Proposal.ProposedByTokenID.Valid && (c.TokenKind != "agent" || c.TokenName != "a")) {
			t.Fatalf("a card's people: %q, token %q (%q)", c.ProposerEmail, c.TokenName, c.TokenKind)
		}
	}
}

// sortNode is a Sort node in a plan (not a Merge Append's "Sort Key").
var sortNode = regexp.MustCompile(`(?m)^\s*(->\s+)?Sort\s+\(`)

// generatedSQL is the text of the query sqlc generated as name in file.
func generatedSQL(t *testing.T, file, name string) string {
	t.Helper()
	parsed, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ToLower(name[:1]) + name[1:]
	for _, decl := range parsed.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && n.Name == want && lit.Kind == token.STRING {
					sql, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					return sql
				}
			}
		}
	}
	t.Fatalf("no query %s in %s", name, file)
	return ""
}
