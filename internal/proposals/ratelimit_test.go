package proposals

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/ratelimit"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func limitedTool(t *testing.T, rl tools.RateLimits) *tools.Tool {
	t.Helper()
	r, err := tools.NewRegistry(policy.DefaultClasses(), tools.Tool{Name: "limited.put", Effect: policy.EffectMutate,
		Schema: json.RawMessage(`{"type":"object"}`), Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local", RateLimits: rl},
		Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := r.Get("limited.put")
	return tool
}

// Fixed windows: the limit holds inside a window, with retry_after to its
// end, and the next window starts afresh. Callers and workspaces count apart.
func TestCountRate_WindowsAndBuckets(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	q := db.New(pool)
	ctx := context.Background()
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, "INSERT INTO workspaces (slug, name) VALUES ('w', 'W') RETURNING id").Scan(&ws); err != nil {
		t.Fatal(err)
	}
	tool := limitedTool(t, tools.RateLimits{PerAgentPerMinute: 2, PerWorkspacePerHour: 3})
	agentA := auth.Principal{UserID: uuid.New(), WorkspaceID: ws, TokenID: uuid.New(), TokenKind: auth.TokenAgent}
	agentB := auth.Principal{UserID: agentA.UserID, WorkspaceID: ws, TokenID: uuid.New(), TokenKind: auth.TokenAgent}
	minute := time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)
	// A write-idempotent tool: its limit per agent is counted in memory
	// (shared between instances off the call path), its workspace's in
	// the transaction.
	svc := &Service{limiter: ratelimit.New(q, nil)}
	countRate := func(ctx context.Context, q *db.Queries, p auth.Principal, tool *tools.Tool, now time.Time) error {
		return svc.countRate(ctx, q, p, tool, false, now)
	}

	for i := range 2 {
		if err := countRate(ctx, q, agentA, tool, minute.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	err := countRate(ctx, q, agentA, tool, minute.Add(45*time.Second))
	var ae *apperr.Error
	if apperr.Code(err) != apperr.ERATELIMIT || !asErr(err, &ae) || ae.Extra["retry_after"] != 15 {
		t.Fatalf("third call in the minute: %v %+v", err, ae)
	}
	// Another agent of the same workspace has its own minute…
	if err := countRate(ctx, q, agentB, tool, minute.Add(50*time.Second)); err != nil {
		t.Fatalf("agent B: %v", err)
	}
	// …and the next minute starts afresh for A, but the workspace's hour is
	// used up (A's two and B's one; A's refused call stopped at its minute).
	err = countRate(ctx, q, agentA, tool, minute.Add(61*time.Second))
	if apperr.Code(err) != apperr.ERATELIMIT || !asErr(err, &ae) || ae.Extra["retry_after"] != 3239 {
		t.Fatalf("the workspace's hour: %v %+v", err, ae)
	}
}

func asErr(err error, target **apperr.Error) bool {
	e, ok := err.(*apperr.Error)
	*target = e
	return ok
}
