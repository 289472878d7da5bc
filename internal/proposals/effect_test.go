package proposals_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// The gate at the moment of effect: each path decides again on what will
// run, and runs only within its ceiling.

func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) putRecords(t *testing.T, conv uuid.UUID, keys ...string) {
	t.Helper()
	f.setMode(t, conv, "auto")
	for _, k := range keys {
		if _, err := f.props.Propose(context.Background(), f.agent, proposals.InConversation(conv),
			call("records.put", `{"collection": "c", "key": "`+k+`", "value": {}}`)); err != nil {
			t.Fatal(err)
		}
	}
	f.setMode(t, conv, "approve")
}

func keysJSON(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = `"k` + string(rune('a'+i)) + `"`
	}
	return "[" + strings.Join(keys, ", ") + "]"
}

func TestApply_OwnerEditOverAThresholdOpensAPacketAndRunsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// records.bulk_delete is high risk: auto-approved here, so only the
	// contract's threshold sends it to an approver.
	f.setWorkspace(t, "auto_approve_high_risk = true")
	conv := f.conversation(t, "")
	f.putRecords(t, conv, "ka", "kb", "kc", "kd", "ke", "kf", "kg", "kh", "ki", "kj", "kk")
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.bulk_delete", `{"collection": "c", "keys": ["ka", "kb"]}`))
	if err != nil || p.Status != proposals.StatusPending {
		t.Fatalf("propose: %+v %v", p, err)
	}
	// The owner widens the call to eleven keys: over the contract's
	// threshold, so it now needs an approver.
	edited := json.RawMessage(`{"collection": "c", "keys": ` + keysJSON(11) + `}`)
	got, err := f.props.Apply(ctx, f.owner, p.ID, edited)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got.Status != proposals.StatusPendingApproval || got.Packet == nil || got.EffectDecision == nil || got.EffectDecision.State != policy.StateDeferred {
		t.Fatalf("the edit did not wait for an approver: %+v", got)
	}
	if got.Decision.State != policy.StateReviewRequired {
		t.Errorf("the decision at propose time was overwritten: %+v", got.Decision)
	}
	if n := f.count(t, "SELECT count(*) FROM records WHERE collection = 'c'"); n != 11 {
		t.Fatalf("%d records left, want 11: something ran", n)
	}
	if !sameArgs(got.AppliedArguments, edited) {
		t.Errorf("the packet's call is %s, want the edited %s", got.AppliedArguments, edited)
	}
	// The approver judges, and runs, the edited call.
	approver := f.person(t, "approver@example.com", auth.RoleApprover)
	a, err := f.props.Approval(ctx, approver, got.Packet.ID)
	if err != nil || !sameArgs(a.Arguments, edited) || len(a.ProposedArguments) == 0 {
		t.Fatalf("the packet shows %s (proposed %s): %v", a.Arguments, a.ProposedArguments, err)
	}
	if _, ran, err := f.props.Approve(ctx, approver, got.Packet.ID, nil); err != nil || ran.Status != proposals.StatusApplied {
		t.Fatalf("approve: %+v %v", ran, err)
	}
	if n := f.count(t, "SELECT count(*) FROM records WHERE collection = 'c'"); n != 0 {
		t.Fatalf("%d records left after the approved edit, want 0", n)
	}
	if acts := f.auditActions(t, p.ID); !contains(acts, "proposal.edited:") || !contains(acts, "proposal.escalated:") {
		t.Errorf("audit: %v", acts)
	}
}

func TestApply_RevokingTheHighRiskOptInStopsTheCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "")
	f.setWorkspace(t, "auto_approve_high_risk = true")
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("email.send", `{"to": "ana@example.com", "subject": "Hi", "body": "Hello"}`))
	if err != nil || p.Status != proposals.StatusPending {
		t.Fatalf("with the opt-in, a high-risk mail waits only for the owner: %+v %v", p, err)
	}
	f.setWorkspace(t, "auto_approve_high_risk = false")
	got, err := f.props.Apply(ctx, f.owner, p.ID, nil)
	if err != nil || got.Status != proposals.StatusPendingApproval || got.EffectDecision.State != policy.StateDeferred {
		t.Fatalf("after the opt-in was revoked the owner's Apply gave %+v %v", got, err)
	}
	if n := f.count(t, "SELECT count(*) FROM outbox"); n != 0 {
		t.Fatalf("%d mails in the outbox: the call ran", n)
	}
	if risk := layer(got.EffectDecision, policy.LayerRisk); risk.State != policy.StateDeferred {
		t.Errorf("the risk layer at effect: %+v", risk)
	}
}

func TestApply_AnEditThatChangesTheRecipientIsReclassified(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "")
	f.setWorkspace(t, "auto_approve_high_risk = true, internal_domains = '{example.com}'")
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("email.send", `{"to": "ana@example.com", "subject": "Hi", "body": "Hello"}`))
	if err != nil || p.ActionClass != tools.ClassEmailInternal {
		t.Fatalf("propose: %+v %v", p, err)
	}
	got, err := f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"to": "bob@elsewhere.org", "subject": "Hi", "body": "Hello"}`))
	if err != nil || got.Status != proposals.StatusApplied {
		t.Fatalf("apply: %+v %v", got, err)
	}
	if got.EffectDecision.ActionClass != tools.ClassEmailExternal || got.Decision.ActionClass != tools.ClassEmailInternal {
		t.Fatalf("classes: at propose %q, at effect %q; want internal then external", got.Decision.ActionClass, got.EffectDecision.ActionClass)
	}
	if !strings.Contains(layer(got.EffectDecision, policy.LayerClass).Reason, tools.ClassEmailExternal) {
		t.Errorf("the class layer at effect: %+v", layer(got.EffectDecision, policy.LayerClass))
	}
}

// classTools has a tool whose class is computed from its argument: "pay"
// classifies as human-only payment.initiate.
func classTools(t *testing.T, runs *atomic.Int32) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(policy.DefaultClasses(),
		tools.Tool{Name: "t.act", Effect: policy.EffectMutate, Schema: json.RawMessage(`{"type":"object","properties":{"kind":{"type":"string"}}}`),
			Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
				runs.Add(1)
				return map[string]any{}, nil
			},
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent,
				Classify: func(a map[string]any, _ tools.Workspace) string {
					if a["kind"] == "pay" {
						return "payment.initiate"
					}
					return "tool.call.local"
				}, ActionClasses: []string{"tool.call.local", "payment.initiate"}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApply_AnEditIntoAHumanOnlyClassIsRefusedWithTheNewDecision(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, classTools(t, &runs))
	ctx := context.Background()
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "")), call("t.act", `{"kind": "note"}`))
	if err != nil || p.Status != proposals.StatusPending {
		t.Fatalf("propose: %+v %v", p, err)
	}
	_, err = f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"kind": "pay"}`))
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.EFORBIDDEN || ae.Extra["decision"] == nil {
		t.Fatalf("apply of a human-only edit: %v", err)
	}
	got, _ := f.props.Get(ctx, f.agent, p.ID)
	if runs.Load() != 0 || got.Status != proposals.StatusPending || got.EffectDecision == nil || got.EffectDecision.State != policy.StateHumanOnly {
		t.Fatalf("%d runs; the proposal is %s with effect decision %+v", runs.Load(), got.Status, got.EffectDecision)
	}
	if !contains(f.auditActions(t, p.ID), "proposal.refused_at_effect:owner") {
		t.Errorf("audit: %v", f.auditActions(t, p.ID))
	}
}

// witnessTools declares a tool that needs a witness but no other gate.
func witnessTools(t *testing.T, runs *atomic.Int32) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(policy.DefaultClasses(),
		tools.Tool{Name: "t.witnessed", Effect: policy.EffectMutate, Schema: json.RawMessage(`{"type":"object"}`),
			Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
				runs.Add(1)
				return map[string]any{}, nil
			},
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local", Constraints: []policy.Constraint{{Kind: policy.ConstraintRequiresWitness}}}},
		tools.Tool{Name: "t.plain", Effect: policy.EffectMutate, Schema: json.RawMessage(`{"type":"object"}`),
			Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
				runs.Add(1)
				return map[string]any{}, nil
			},
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, Risk: policy.RiskHigh, ActionClass: "tool.call.local"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWitness_OneApproverCannotRunItOnAnyPath(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, witnessTools(t, &runs))
	ctx := context.Background()
	first, second := f.person(t, "a1@example.com", auth.RoleApprover), f.person(t, "a2@example.com", auth.RoleAdmin)
	// The automatic path: an auto conversation does not run it.
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.witnessed", `{}`))
	if err != nil || p.Status != proposals.StatusPendingApproval || runs.Load() != 0 {
		t.Fatalf("auto path: %+v %v (%d runs)", p, err, runs.Load())
	}
	// The owner (the proposer's principal) cannot approve it at all.
	if _, _, err := f.props.Approve(ctx, f.owner, p.Packet.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("the owner approved their own call: %v", err)
	}
	// One approver: recorded, not run, however often they approve.
	for range 2 {
		a, _, err := f.props.Approve(ctx, first, p.Packet.ID, nil)
		if err != nil || a.Status != proposals.ApprovalPending || runs.Load() != 0 {
			t.Fatalf("one approver: %+v %v (%d runs)", a, err, runs.Load())
		}
	}
	if _, ran, err := f.props.Approve(ctx, second, p.Packet.ID, nil); err != nil || ran.Status != proposals.StatusApplied || runs.Load() != 1 {
		t.Fatalf("the witness: %+v %v (%d runs)", ran, err, runs.Load())
	}
	// A notebook's autonomous trust level does not run it either.
	nb := f.notebook(t)
	f.setTrust(t, nb, policy.TrustAutonomous)
	cell, err := f.props.Propose(ctx, f.agent, proposals.InNotebook(nb), call("t.witnessed", `{}`))
	if err != nil || cell.Status != proposals.StatusPendingApproval || runs.Load() != 1 {
		t.Fatalf("autonomous notebook: %+v %v (%d runs)", cell, err, runs.Load())
	}
}

func TestWitness_AnApproverCanAskForOneAndKeepsTheirConstraints(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, witnessTools(t, &runs))
	ctx := context.Background()
	first, second := f.person(t, "a1@example.com", auth.RoleApprover), f.person(t, "a2@example.com", auth.RoleApprover)
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.plain", `{}`))
	if err != nil || p.Status != proposals.StatusPendingApproval {
		t.Fatalf("propose: %+v %v", p, err)
	}
	a, _, err := f.props.Approve(ctx, first, p.Packet.ID, []policy.Constraint{{Kind: policy.ConstraintRequiresWitness}, {Kind: policy.ConstraintDryRunOnly}})
	if err != nil || a.Status != proposals.ApprovalPending || !a.RequiresWitness || runs.Load() != 0 {
		t.Fatalf("the first approver asked for a witness: %+v %v", a, err)
	}
	_, ran, err := f.props.Approve(ctx, second, p.Packet.ID, nil)
	if err != nil || ran.Status != proposals.StatusApplied {
		t.Fatalf("the witness: %+v %v", ran, err)
	}
	// The first approver's dry_run_only was kept: nothing took effect.
	if !ran.DryRun || runs.Load() != 0 {
		t.Fatalf("the first approver's constraint was dropped: dry run %v, %d runs", ran.DryRun, runs.Load())
	}
}

// financeTools declares a payment-like call that waits for finance-approver.
func financeTools(t *testing.T, runs *atomic.Int32) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(policy.DefaultClasses(),
		tools.Tool{Name: "t.refund", Effect: policy.EffectMutate, Schema: json.RawMessage(`{"type":"object"}`),
			Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
				runs.Add(1)
				return map[string]any{}, nil
			},
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
				Gating: tools.Gating{Required: true, ApproverRole: "finance-approver"}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) grantRole(t *testing.T, p *auth.Principal, role string) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), "INSERT INTO approver_roles (workspace_id, user_id, role) VALUES ($1, $2, $3)", p.WorkspaceID, p.UserID, role); err != nil {
		t.Fatal(err)
	}
	p.ApproverRoles = append(p.ApproverRoles, role)
}

func TestApprovalRole_ANamedRoleIsResolvedOnlyByItsHolders(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, financeTools(t, &runs))
	ctx := context.Background()
	approver, admin := f.person(t, "approver@example.com", auth.RoleApprover), f.person(t, "admin@example.com", auth.RoleAdmin)
	finance := f.person(t, "finance@example.com", auth.RoleMember)
	f.grantRole(t, &finance, "finance-approver")
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.refund", `{}`))
	if err != nil || p.Packet == nil || p.Packet.ApproverRole != "finance-approver" {
		t.Fatalf("propose: %+v %v", p, err)
	}
	for _, who := range []auth.Principal{approver, admin} {
		if _, _, err := f.props.Approve(ctx, who, p.Packet.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN {
			t.Fatalf("%s approved a finance packet: %v", who.Email, err)
		}
		if _, _, err := f.props.RejectApproval(ctx, who, p.Packet.ID, "no"); apperr.Code(err) != apperr.EFORBIDDEN {
			t.Fatalf("%s rejected a finance packet: %v", who.Email, err)
		}
		if page, err := f.props.Approvals(ctx, who, proposals.ApprovalFilter{}, proposals.ApprovalPageRequest{Limit: 50}); err != nil || len(page.Approvals) != 0 {
			t.Fatalf("%s's queue shows %d packets (%v), want none", who.Email, len(page.Approvals), err)
		}
		if _, err := f.props.Approval(ctx, who, p.Packet.ID); apperr.Code(err) != apperr.ENOTFOUND {
			t.Fatalf("%s opened the finance packet: %v", who.Email, err)
		}
	}
	if page, err := f.props.Approvals(ctx, finance, proposals.ApprovalFilter{}, proposals.ApprovalPageRequest{Limit: 50}); err != nil || len(page.Approvals) != 1 || page.Approvals[0].ApproverRole != "finance-approver" {
		t.Fatalf("the finance approver's queue: %+v %v", page, err)
	}
	// A role revoked a moment ago no longer resolves, even on a request that
	// authenticated before the revocation.
	if _, err := f.pool.Exec(ctx, "DELETE FROM approver_roles WHERE user_id = $1", finance.UserID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.props.Approve(ctx, finance, p.Packet.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN || runs.Load() != 0 {
		t.Fatalf("a revoked role approved: %v (%d runs)", err, runs.Load())
	}
	f.grantRole(t, &finance, "finance-approver")
	if _, ran, err := f.props.Approve(ctx, finance, p.Packet.ID, nil); err != nil || ran.Status != proposals.StatusApplied || runs.Load() != 1 {
		t.Fatalf("the role's holder: %+v %v (%d runs)", ran, err, runs.Load())
	}
}

func TestApprove_AFailingConstraintFailsTheCallAndTheyMoveTogether(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approver := f.person(t, "approver@example.com", auth.RoleApprover)
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.send", `{"to": "ana@example.com"}`))
	if err != nil || p.Packet == nil {
		t.Fatalf("propose: %+v %v", p, err)
	}
	// The approver attaches an expiry that has already passed.
	a, ran, err := f.props.Approve(ctx, approver, p.Packet.ID, []policy.Constraint{{Kind: policy.ConstraintExpiresAt, At: mustPast(t)}})
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if a.Status != proposals.ApprovalApproved || ran.Status != proposals.StatusFailed || !strings.Contains(ran.Error, "expires_at") || runs.Load() != 0 {
		t.Fatalf("packet %s, proposal %s (%q), %d runs", a.Status, ran.Status, ran.Error, runs.Load())
	}
	got, _ := f.props.Get(ctx, f.agent, p.ID)
	if got.Status != proposals.StatusFailed || !strings.Contains(got.Error, "expires_at") {
		t.Fatalf("the agent reads %s %q", got.Status, got.Error)
	}
	detail, _ := f.props.Approval(ctx, approver, p.Packet.ID)
	if detail.Status != proposals.ApprovalApproved || detail.ProposalStatus != proposals.StatusFailed || detail.Error == "" {
		t.Fatalf("the packet says %s / %s %q", detail.Status, detail.ProposalStatus, detail.Error)
	}
	if n := f.count(t, "SELECT count(*) FROM approvals a JOIN proposals p ON p.id = a.proposal_id WHERE a.status = 'approved' AND p.status = 'pending_approval'"); n != 0 {
		t.Fatalf("%d approved packets whose call still waits", n)
	}
}

func TestApprove_UnknownOrMalformedConstraintIsRefusedAndNothingRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approver := f.person(t, "approver@example.com", auth.RoleApprover)
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.send", `{"to": "ana@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []policy.Constraint{{Kind: "spend_limit"}, {Kind: policy.ConstraintMaxAmount}} {
		_, _, err := f.props.Approve(ctx, approver, p.Packet.ID, []policy.Constraint{c})
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.EINVALID || len(ae.Fields) == 0 || ae.Fields[0].Field != "constraints.0" {
			t.Fatalf("constraint %+v: %v", c, err)
		}
	}
	if runs.Load() != 0 || f.count(t, "SELECT count(*) FROM approval_votes") != 0 {
		t.Fatal("a refused approval ran or voted")
	}
}

func TestReconcile_SettlesPacketsAndCallsThatDisagree(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	conv := proposals.InConversation(f.conversation(t, "auto"))
	var ids [3]proposals.Proposal
	for i := range ids {
		p, err := f.props.Propose(ctx, f.agent, conv, call("t.send", `{"to": "ana@example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = p
	}
	// What a crash between two transactions of an older version left:
	// approved but never started; rejected while the call still waits; a
	// packet still open whose call was resolved.
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := f.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec("UPDATE approvals SET status = 'approved', resolved_at = now() WHERE proposal_id = $1", ids[0].ID)
	exec("UPDATE approvals SET status = 'rejected', rejection_reason = 'no', resolved_at = now() WHERE proposal_id = $1", ids[1].ID)
	exec("UPDATE proposals SET status = 'applied', resolved_at = now() WHERE id = $1", ids[2].ID)
	n, err := f.props.Reconcile(ctx)
	if err != nil || n != 3 {
		t.Fatalf("reconciled %d: %v", n, err)
	}
	for i, want := range []string{proposals.StatusFailed, proposals.StatusRejected, proposals.StatusApplied} {
		got, _ := f.props.Get(ctx, f.agent, ids[i].ID)
		if got.Status != want {
			t.Errorf("call %d is %s, want %s", i, got.Status, want)
		}
	}
	if runs.Load() != 0 {
		t.Fatal("the reconciler ran a call")
	}
	if n := f.count(t, "SELECT count(*) FROM audit_events WHERE action = 'approval.reconciled'"); n != 3 {
		t.Errorf("%d reconcile audit rows, want 3", n)
	}
	if n, _ := f.props.Reconcile(ctx); n != 0 {
		t.Errorf("a second pass settled %d", n)
	}
}

func TestRun_AFailingInDatabaseToolLeavesNoPartialWorkAndNoClaim(t *testing.T) {
	t.Parallel()
	r, err := tools.NewRegistry(policy.DefaultClasses(),
		tools.Tool{Name: "t.half", Effect: policy.EffectMutate, Schema: json.RawMessage(`{"type":"object"}`),
			Execute: func(ctx context.Context, q *db.Queries, ws uuid.UUID, _ json.RawMessage) (any, error) {
				if _, err := q.PutRecord(ctx, db.PutRecordParams{WorkspaceID: ws, Collection: "c", Key: "half", Value: json.RawMessage(`{}`)}); err != nil {
					return nil, err
				}
				return nil, errors.New("the second half broke")
			},
			Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, r)
	p, err := f.props.Propose(context.Background(), f.agent, proposals.InConversation(f.conversation(t, "auto")), call("t.half", `{}`))
	if err != nil || p.Status != proposals.StatusFailed || p.Error != "Internal error while running the tool." {
		t.Fatalf("propose: %+v %v", p, err)
	}
	if n := f.count(t, "SELECT count(*) FROM records"); n != 0 {
		t.Errorf("the failed tool's half-done work committed (%d records)", n)
	}
	if n := f.count(t, "SELECT count(*) FROM proposals WHERE status = 'applying'"); n != 0 {
		t.Errorf("%d calls left applying", n)
	}
}

// forgetRates empties the rate counters: for a test about something else
// that proposes more irreversible calls a minute than the class allows
// (one per agent).
func (f *fixture) forgetRates(t *testing.T) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), "DELETE FROM rate_counters"); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) setWorkspace(t *testing.T, set string) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), "UPDATE workspaces SET "+set); err != nil {
		t.Fatal(err)
	}
}

func layer(d *policy.Decision, name string) policy.Verdict {
	if d != nil {
		for _, l := range d.Layers {
			if l.Layer == name {
				return l
			}
		}
	}
	return policy.Verdict{}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func sameArgs(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xa) == string(yb)
}

func mustPast(t *testing.T) time.Time {
	t.Helper()
	return time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
}
