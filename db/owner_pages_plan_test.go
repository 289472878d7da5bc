package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The header's count of waiting cards and the home page's latest agent
// calls read through indexes, not through every proposal of the owner:
// with 20,000 applied calls and three waiting cards, neither plan scans
// proposals sequentially (migration 25: the count took 2.4 s at half a
// million calls).
func TestOwnerPages_ReadProposalsThroughIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "owner-pages")
	if _, err := pool.Exec(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_token_id, proposed_by_kind,
		                       tool, effect, arguments, rationale, permission_mode, disposition, status, created_at)
		SELECT $1, $2, $3, $2, $4, 'agent', 'records.put', 'mutate', '{}', 'an applied call', 'auto', 'auto-apply',
		       CASE WHEN i <= 2 THEN 'pending' ELSE 'applied' END, now() - i * interval '1 second'
		FROM generate_series(1, 20000) i`, f.ws, f.user, f.conv, f.token); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE proposals`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		name, sql, index string
		args             []any
	}{
		{"CountWaitingCards", db.CountWaitingCardsSQL, "proposals_waiting_idx", []any{f.ws, f.user}},
		{"ListAgentOutcomes", db.ListAgentOutcomesSQL, "proposals_owner_time_idx", []any{f.ws, f.user}},
	} {
		text := explain(t, ctx, pool, q.sql, q.args...)
		if !strings.Contains(text, q.index) || strings.Contains(text, "Seq Scan on proposals") {
			t.Errorf("%s does not read through %s:\n%s", q.name, q.index, text)
		}
	}
	// And they answer.
	qs := db.New(pool)
	if n, err := qs.CountWaitingCards(ctx, db.CountWaitingCardsParams{WorkspaceID: f.ws, OwnerID: f.user}); err != nil || n != 3 {
		t.Errorf("waiting cards: %d (%v); want 3 (the fixture's call and two of these)", n, err)
	}
	if rows, err := qs.ListAgentOutcomes(ctx, db.ListAgentOutcomesParams{WorkspaceID: f.ws, UserID: f.user}); err != nil || len(rows) != 20 {
		t.Errorf("agent outcomes: %d rows (%v); want the latest 20", len(rows), err)
	}
}
