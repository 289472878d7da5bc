package db_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The classes a conversation's header offers graduation hints for come
// from its latest calls, read backwards through the conversation's index
// up to the limit, not from a DISTINCT over its whole history; a class
// used only long ago is not among them.
func TestScopeClasses_ReadTheLatestCallsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	f := newCallFixture(t, ctx, pool, "scope-classes")
	// An old call of another class, 5,000 calls, and a recent call of a
	// third class, in that order (the order of their lines).
	call := func(tool, effect, class string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `
			INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments,
			                       rationale, permission_mode, disposition, action_class)
			VALUES ($1, $2, $3, $2, 'agent', $4, $5, '{}', 'a call of ' || $4, 'approve', 'propose', $6)`,
			f.ws, f.user, f.conv, tool, effect, class); err != nil {
			t.Fatal(err)
		}
	}
	call("email.send", "mutate", "email.send.external")
	fillHistory(t, ctx, pool, f, 5000)
	call("records.get", "read", "records.read")
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE proposals`); err != nil {
		t.Fatal(err)
	}
	conv := uuid.NullUUID{UUID: f.conv, Valid: true}
	plan := explain(t, ctx, pool, db.ListScopeClassesSQL, f.ws, conv, 1000, uuid.NullUUID{})
	if !strings.Contains(plan, "proposals_conversation_idx") || strings.Contains(plan, "Seq Scan on proposals") {
		t.Errorf("the classes do not read the conversation's index from its newest call:\n%s", plan)
	}
	classes, err := db.New(pool).ListScopeClasses(ctx, db.ListScopeClassesParams{WorkspaceID: f.ws, ConversationID: conv, MaxCalls: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(classes, []string{"records.read", "records.write"}) {
		t.Fatalf("classes %v; want the latest calls' records.read and records.write, not the old mail's", classes)
	}
}
