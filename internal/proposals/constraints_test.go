package proposals_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// constrainedTools declares reads with constraints, counting executions.
func constrainedTools(t *testing.T, runs *atomic.Int32) *tools.Registry {
	t.Helper()
	exec := func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
		runs.Add(1)
		return map[string]any{"ok": true, "account": map[string]any{"number": "DE89 3704", "bank": "X"}}, nil
	}
	decl := func(name string, cs ...policy.Constraint) tools.Tool {
		return tools.Tool{Name: name, Effect: policy.EffectRead, Schema: json.RawMessage(`{"type":"object"}`), Execute: exec,
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityRead, ActionClass: "read.context", Constraints: cs,
				Facts: func(args map[string]any) policy.Facts {
					amount, _ := args["amount"].(float64)
					return policy.Facts{Amount: &amount}
				}}}
	}
	r, err := tools.NewRegistry(policy.DefaultClasses(),
		decl("t.dry", policy.Constraint{Kind: policy.ConstraintDryRunOnly}),
		decl("t.redacted", policy.Constraint{Kind: policy.ConstraintRedactionRules, Values: []string{"account.number"}}),
		decl("t.capped", policy.Constraint{Kind: policy.ConstraintMaxAmount, Amount: 100}),
		decl("t.staging", policy.Constraint{Kind: policy.ConstraintStagingOnly}),
		decl("t.twice", policy.Constraint{Kind: policy.ConstraintRateLimit, Limit: 2, Window: time.Hour}),
		decl("t.paced", policy.Constraint{Kind: policy.ConstraintRateLimit, Limit: 2, Window: time.Minute},
			policy.Constraint{Kind: policy.ConstraintRateLimit, Limit: 10, Window: 24 * time.Hour}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConstraints_AreCheckedWhenTheCallRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, constrainedTools(t, &runs))
	ctx := context.Background()
	conv := proposals.InConversation(f.conversation(t, ""))

	// dry_run_only: applied, marked as a dry run, and the executor never ran.
	p, err := f.props.Propose(ctx, f.agent, conv, call("t.dry", `{}`))
	if err != nil || p.Status != proposals.StatusApplied || !p.DryRun || p.Decision.State != policy.StateAllowedWithConstraints || runs.Load() != 0 {
		t.Fatalf("dry run: %+v %v, runs %d", p, err, runs.Load())
	}
	// redaction_rules: the stored result has the field redacted.
	p, err = f.props.Propose(ctx, f.agent, conv, call("t.redacted", `{}`))
	var res struct {
		Account struct{ Number, Bank string } `json:"account"`
	}
	if err != nil || json.Unmarshal(p.Result, &res) != nil || res.Account.Number != policy.Redacted || res.Account.Bank != "X" {
		t.Fatalf("redacted: %s %v", p.Result, err)
	}
	var stored string
	f.pool.QueryRow(ctx, "SELECT result->'account'->>'number' FROM proposals WHERE id = $1", p.ID).Scan(&stored)
	if stored != policy.Redacted {
		t.Fatalf("the database keeps %q", stored)
	}
	// max_amount: refused with the constraint named, nothing recorded but
	// the audit row; within the cap it runs.
	before := runs.Load()
	_, err = f.props.Propose(ctx, f.agent, conv, call("t.capped", `{"amount": 250}`))
	var ae *apperr.Error
	if apperr.Code(err) != apperr.EFORBIDDEN || !errorsAs(err, &ae) || ae.Extra["constraint"] != policy.ConstraintMaxAmount {
		t.Fatalf("over the cap: %v", err)
	}
	if p, err := f.props.Propose(ctx, f.agent, conv, call("t.capped", `{"amount": 99}`)); err != nil || p.Status != proposals.StatusApplied {
		t.Fatalf("under the cap: %+v %v", p, err)
	}
	// staging_only: this deployment is production.
	if _, err := f.props.Propose(ctx, f.agent, conv, call("t.staging", `{}`)); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("staging only in production: %v", err)
	}
	if got := runs.Load() - before; got != 1 {
		t.Fatalf("%d executions, want 1 (only the call under the cap)", got)
	}
	// rate_limit: two calls an hour ran; the third is refused, naming it.
	for i := range 2 {
		if _, err := f.props.Propose(ctx, f.agent, conv, call("t.twice", `{}`)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if _, err := f.props.Propose(ctx, f.agent, conv, call("t.twice", `{}`)); apperr.Code(err) != apperr.EFORBIDDEN || !errorsAs(err, &ae) || ae.Extra["constraint"] != policy.ConstraintRateLimit {
		t.Fatalf("third call under rate_limit: %v", err)
	}
	var twice int
	f.pool.QueryRow(ctx, "SELECT count(*) FROM proposals WHERE tool = 't.twice'").Scan(&twice)
	if twice != 2 {
		t.Fatalf("%d t.twice proposals recorded, want 2", twice)
	}
	var refused, recorded int
	f.pool.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE action = 'proposal.refused'").Scan(&refused)
	f.pool.QueryRow(ctx, "SELECT count(*) FROM proposals WHERE tool IN ('t.capped', 't.staging')").Scan(&recorded)
	if refused != 3 || recorded != 1 {
		t.Fatalf("%d refusals audited and %d proposals recorded, want 3 and 1", refused, recorded)
	}
}

func errorsAs(err error, target **apperr.Error) bool {
	e, ok := err.(*apperr.Error)
	*target = e
	return ok
}

// Two rate_limits on one call are each compared with the calls of their
// own window: three calls an hour ago are under 10 a day and do not count
// against 2 a minute, so two calls run now and the third is refused by
// the minute's limit. (The day's count was compared with both limits, and
// the first call was refused.)
func TestConstraints_EachRateLimitCountsItsOwnWindow(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, constrainedTools(t, &runs))
	ctx := context.Background()
	convID := f.conversation(t, "")
	conv := proposals.InConversation(convID)
	for i := range 3 {
		p, err := f.props.Propose(ctx, f.agent, conv, call("t.paced", `{}`))
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if _, err := f.pool.Exec(ctx, `UPDATE proposals SET created_at = now() - interval '1 hour' WHERE id = $1`, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if p, err := f.props.Propose(ctx, f.agent, conv, call("t.paced", `{}`)); err != nil || p.Status != proposals.StatusApplied {
			t.Fatalf("call %d this minute: %+v %v", i+1, p, err)
		}
	}
	_, err := f.props.Propose(ctx, f.agent, conv, call("t.paced", `{}`))
	var ae *apperr.Error
	if apperr.Code(err) != apperr.EFORBIDDEN || !errorsAs(err, &ae) || ae.Extra["constraint"] != policy.ConstraintRateLimit ||
		!strings.Contains(err.Error(), "limit of 2") {
		t.Fatalf("the third call this minute: %v, want refused by the limit of 2 a minute", err)
	}
	if got := runs.Load(); got != 5 {
		t.Fatalf("%d runs, want 5 (3 an hour ago, 2 now)", got)
	}
}
