package proposals_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// gatedTools declares a high-risk send (deferred unless the workspace opts
// in), a high-risk destructive wipe, and a human-gated admin-only transfer
// with a witness, counting executions.
func gatedTools(t *testing.T, runs *atomic.Int32) *tools.Registry {
	t.Helper()
	exec := func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
		runs.Add(1)
		return map[string]any{"sent": true}, nil
	}
	schema := json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`)
	r, err := tools.NewRegistry(policy.DefaultClasses(),
		tools.Tool{Name: "t.send", Effect: policy.EffectMutate, Schema: schema, Execute: exec,
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteNonIdempotent, Risk: policy.RiskHigh, ActionClass: "proposal.submit",
				Idempotency: tools.Idempotency{Required: true},
				Summarize:   func(a map[string]any) string { return "Send to " + a["to"].(string) }}},
		tools.Tool{Name: "t.wipe", Effect: policy.EffectDestructive, Schema: schema, Execute: exec,
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityIrreversible, Risk: policy.RiskHigh, ActionClass: "tool.call.local",
				Idempotency: tools.Idempotency{Required: true}, Gating: tools.Gating{NotGatedReason: "test"}}},
		tools.Tool{Name: "t.transfer", Effect: policy.EffectMutate, Schema: schema, Execute: exec,
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteNonIdempotent, ActionClass: "proposal.submit",
				Idempotency: tools.Idempotency{Required: true}, Gating: tools.Gating{Required: true, ApproverRole: "admin"},
				Constraints: []policy.Constraint{{Kind: policy.ConstraintRequiresWitness}}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApprovals_TwoApproversAtOnceRunTheCallOnce(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approvers := []auth.Principal{f.person(t, "a1@example.com", auth.RoleApprover), f.person(t, "a2@example.com", auth.RoleApprover)}
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.send", `{"to": "ana@example.com"}`))
	if err != nil || p.Status != proposals.StatusPendingApproval || p.Packet == nil || p.Packet.Summary != "Send to ana@example.com" {
		t.Fatalf("propose: %+v %v", p, err)
	}
	if runs.Load() != 0 {
		t.Fatal("a deferred call ran")
	}
	var wg sync.WaitGroup
	errs := make([]error, len(approvers))
	for i, a := range approvers {
		wg.Go(func() { _, _, errs[i] = f.props.Approve(ctx, a, p.Packet.ID, nil) })
	}
	wg.Wait()
	ok, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case apperr.Code(err) == apperr.ECONFLICT:
			conflicts++
		default:
			t.Fatalf("approve: %v", err)
		}
	}
	if ok != 1 || conflicts != 1 || runs.Load() != 1 {
		t.Fatalf("%d approved, %d conflicts, %d runs; want 1, 1, 1", ok, conflicts, runs.Load())
	}
	got, err := f.props.Get(ctx, f.agent, p.ID)
	if err != nil || got.Status != proposals.StatusApplied || got.ApplyPath != proposals.PathApproval {
		t.Fatalf("the agent reads %+v %v", got, err)
	}
}

func TestApprovals_ExpiredPacketIsGoneAndNeverRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approver := f.person(t, "a1@example.com", auth.RoleApprover)
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "")), call("t.send", `{"to": "ana@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, "UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = $1", p.Packet.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.props.Approve(ctx, approver, p.Packet.ID, nil); apperr.Code(err) != apperr.EGONE {
		t.Fatalf("approve an expired packet: %v", err)
	}
	ids, err := f.props.ExpireApprovals(ctx)
	if err != nil || len(ids) != 1 || ids[0] != p.Packet.ID {
		t.Fatalf("sweeper: %v %v", ids, err)
	}
	got, _ := f.props.Get(ctx, f.agent, p.ID)
	if got.Status != proposals.StatusExpired || runs.Load() != 0 {
		t.Fatalf("after expiry the agent reads %s; %d runs", got.Status, runs.Load())
	}
	if _, _, err := f.props.Approve(ctx, approver, p.Packet.ID, nil); apperr.Code(err) != apperr.EGONE {
		t.Fatalf("approve after the sweep: %v", err)
	}
}

func TestApprovals_RejectReachesTheAgentAndRolesHold(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approver := f.person(t, "a1@example.com", auth.RoleApprover)
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "")), call("t.send", `{"to": "bob@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	agentOfApprover := approver
	agentOfApprover.TokenKind = auth.TokenAgent
	for name, who := range map[string]auth.Principal{"member": f.other, "agent token": agentOfApprover, "the proposer": f.owner} {
		if _, _, err := f.props.Approve(ctx, who, p.Packet.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN {
			t.Errorf("%s approves: %v", name, err)
		}
	}
	if _, _, err := f.props.RejectApproval(ctx, approver, p.Packet.ID, ""); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("reject without a reason: %v", err)
	}
	if _, _, err := f.props.RejectApproval(ctx, approver, p.Packet.ID, "Wrong recipient."); err != nil {
		t.Fatal(err)
	}
	got, _ := f.props.Get(ctx, f.agent, p.ID)
	if got.Status != proposals.StatusRejected || got.RejectionReason != "Wrong recipient." || runs.Load() != 0 {
		t.Fatalf("the agent reads %s %q; %d runs", got.Status, got.RejectionReason, runs.Load())
	}
	if _, _, err := f.props.Approve(ctx, approver, p.Packet.ID, nil); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("approve after reject: %v", err)
	}
}

func TestApprovals_AdminPacketNeedsTwoDistinctAdmins(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approver := f.person(t, "a1@example.com", auth.RoleApprover)
	admin1, admin2 := f.person(t, "ad1@example.com", auth.RoleAdmin), f.person(t, "ad2@example.com", auth.RoleAdmin)
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.transfer", `{"to": "acct"}`))
	if err != nil || p.Status != proposals.StatusPendingApproval {
		t.Fatalf("propose: %+v %v", p, err)
	}
	if _, _, err := f.props.Approve(ctx, approver, p.Packet.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("an approver on an admin packet: %v", err)
	}
	a, _, err := f.props.Approve(ctx, admin1, p.Packet.ID, nil)
	if err != nil || a.Status != proposals.ApprovalPending || runs.Load() != 0 {
		t.Fatalf("first admin: %+v %v, %d runs", a, err, runs.Load())
	}
	if a, _, err := f.props.Approve(ctx, admin1, p.Packet.ID, nil); err != nil || a.Status != proposals.ApprovalPending || runs.Load() != 0 {
		t.Fatalf("the same admin twice is not a witness: %+v %v", a, err)
	}
	a, ran, err := f.props.Approve(ctx, admin2, p.Packet.ID, nil)
	if err != nil || a.Status != proposals.ApprovalApproved || ran.Status != proposals.StatusApplied || runs.Load() != 1 {
		t.Fatalf("second admin: %+v %+v %v, %d runs", a, ran, err, runs.Load())
	}
}

// With auto_approve_high_risk on, the same high-risk call runs without a
// packet, and a destructive call in a conversation still needs its owner.
func TestApprovals_AutoApproveHighRiskSkipsThePacketNotTheOwner(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, "UPDATE workspaces SET auto_approve_high_risk = true"); err != nil {
		t.Fatal(err)
	}
	conv := proposals.InConversation(f.conversation(t, "auto"))
	p, err := f.props.Propose(ctx, f.agent, conv, call("t.send", `{"to": "ana@example.com"}`))
	if err != nil || p.Status != proposals.StatusApplied || p.Packet != nil || runs.Load() != 1 {
		t.Fatalf("high risk with the opt-in: %+v %v", p, err)
	}
	w, err := f.props.Propose(ctx, f.agent, conv, call("t.wipe", `{}`))
	if err != nil || w.Status != proposals.StatusPending || w.Disposition != string(policy.Propose) || runs.Load() != 1 {
		t.Fatalf("destructive in auto with the opt-in: %+v %v", w, err)
	}
	var packets int
	f.pool.QueryRow(ctx, "SELECT count(*) FROM approvals").Scan(&packets)
	if packets != 0 {
		t.Fatalf("%d packets", packets)
	}
}

func TestStuck_ClaimsThatNeverFinishedAreSettledByAPerson(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	approver := f.person(t, "a1@example.com", auth.RoleApprover)
	admin := f.person(t, "ad@example.com", auth.RoleAdmin)
	conv := proposals.InConversation(f.conversation(t, ""))
	old, _ := f.props.Propose(ctx, f.agent, conv, call("records.put", `{"collection":"c","key":"a","value":{}}`))
	fresh, _ := f.props.Propose(ctx, f.agent, conv, call("records.put", `{"collection":"c","key":"b","value":{}}`))
	// A crash after the claim: applying, and never finished.
	f.pool.Exec(ctx, "UPDATE proposals SET status = 'applying', claimed_at = now() - interval '10 minutes' WHERE id = $1", old.ID)
	f.pool.Exec(ctx, "UPDATE proposals SET status = 'applying', claimed_at = now() WHERE id = $1", fresh.ID)

	stuck, err := f.props.Stuck(ctx, approver)
	if err != nil || len(stuck) != 1 || stuck[0].ID != old.ID {
		t.Fatalf("stuck: %v %v", stuck, err)
	}
	if _, err := f.props.Stuck(ctx, f.owner); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("a member lists stuck calls: %v", err)
	}
	if _, err := f.props.Settle(ctx, approver, old.ID, false, "checked the store"); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("an approver settles: %v", err)
	}
	if _, err := f.props.Settle(ctx, admin, fresh.ID, false, "too early"); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("settle a fresh claim: %v", err)
	}
	got, err := f.props.Settle(ctx, admin, old.ID, false, "no record in the store")
	if err != nil || got.Status != proposals.StatusFailed || got.Error != "Did not run (settled after review): no record in the store" {
		t.Fatalf("settle: %+v %v", got, err)
	}
	if p, _ := f.props.Get(ctx, f.agent, old.ID); p.Status != proposals.StatusFailed {
		t.Fatalf("the agent reads %s", p.Status)
	}
	if _, err := f.props.Settle(ctx, admin, old.ID, true, "again"); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("settle twice: %v", err)
	}
}
