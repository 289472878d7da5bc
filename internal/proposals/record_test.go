package proposals_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// strings runs a query that returns one text column.
func (f *fixture) strings(t *testing.T, sql string, args ...any) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// receiptsOf lists a proposal's receipts as "kind:outcome", in order.
func (f *fixture) receiptsOf(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	return f.strings(t, "SELECT kind || ':' || coalesce(content->>'outcome', '') FROM receipts WHERE proposal_id = $1 ORDER BY created_at, id", id)
}

// evidenceOf lists a proposal's evidence as "label:weight".
func (f *fixture) evidenceOf(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	return f.strings(t, "SELECT label || ':' || weight::text FROM evidence WHERE proposal_id = $1 ORDER BY id", id)
}

func equal(a []string, b ...string) bool {
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

func TestReceipts_EveryOutcomeLeavesItsReceiptAndAPersonsJudgmentItsEvidence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "auto")
	put := func(key, value string) proposals.Input {
		return call("records.put", `{"collection": "c", "key": "`+key+`", "value": {"text": "`+value+`"}}`)
	}
	// The automatic path: a receipt, and no evidence (nobody judged it).
	auto, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), put("k1", "hello world"))
	if err != nil || auto.Status != proposals.StatusApplied {
		t.Fatalf("auto: %+v %v", auto, err)
	}
	if r, e := f.receiptsOf(t, auto.ID), f.evidenceOf(t, auto.ID); !equal(r, "execution:auto") || len(e) != 0 {
		t.Errorf("auto: receipts %v, evidence %v", r, e)
	}
	f.setMode(t, conv, "approve")
	pending := func(key string) proposals.Proposal {
		p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), put(key, "hello world"))
		if err != nil || p.Status != proposals.StatusPending {
			t.Fatalf("propose: %+v %v", p, err)
		}
		return p
	}
	cases := []struct {
		name     string
		act      func(p proposals.Proposal) error
		receipts []string
		evidence []string
	}{
		{"applied as proposed", func(p proposals.Proposal) error { _, err := f.props.Apply(ctx, f.owner, p.ID, nil); return err },
			[]string{"execution:owner"}, []string{"approved:0.85"}},
		{"a minor edit", func(p proposals.Proposal) error {
			_, err := f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"collection": "c", "key": "k3", "value": {"text": "hello worle"}}`))
			return err
		}, []string{"correction:edited", "execution:owner"}, []string{"minor_edit:0.35"}},
		{"a heavy rewrite", func(p proposals.Proposal) error {
			_, err := f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"collection": "other", "key": "zz", "value": {"text": "completely new"}}`))
			return err
		}, []string{"correction:edited", "execution:owner"}, []string{"heavy_rewrite:-0.55"}},
		{"rejected", func(p proposals.Proposal) error { _, err := f.props.Reject(ctx, f.owner, p.ID, "no"); return err },
			[]string{"refusal:rejected"}, []string{"rejected:-1"}},
	}
	for i, c := range cases {
		p := pending("k" + string(rune('2'+i)))
		if err := c.act(p); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r, e := f.receiptsOf(t, p.ID), f.evidenceOf(t, p.ID); !equal(r, c.receipts...) || !equal(e, c.evidence...) {
			t.Errorf("%s: receipts %v (want %v), evidence %v (want %v)", c.name, r, c.receipts, e, c.evidence)
		}
	}
	// A notebook cell discarded is dropped.
	nb := f.notebook(t)
	cell, err := f.props.Propose(ctx, f.agent, proposals.InNotebook(nb), put("n1", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Reject(ctx, f.owner, cell.ID, "Discarded by the owner."); err != nil {
		t.Fatal(err)
	}
	if e := f.evidenceOf(t, cell.ID); !equal(e, "dropped:-1") {
		t.Errorf("discarded cell: evidence %v", e)
	}
	// A human-only call is refused to the agent with a receipt.
	pay, _ := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("payment.initiate", `{"amount": 10, "currency": "EUR", "payee": "ACME"}`))
	if r := f.receiptsOf(t, pay.ID); !equal(r, "refusal:human_only") {
		t.Errorf("human-only: receipts %v", r)
	}
	// A blocked or constraint-broken call has no proposal, but a receipt.
	f.setWorkspace(t, "webhook_allowlist = '{}'")
	f.setMode(t, conv, "auto")
	if _, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("webhook.post", `{"url": "https://example.com/x", "payload": {}}`)); err == nil {
		t.Fatal("a webhook off the allowlist ran")
	}
	if n := f.count(t, "SELECT count(*) FROM receipts WHERE kind = 'refusal' AND content->>'outcome' = 'constraint' AND content->>'tool' = 'webhook.post'"); n != 1 {
		t.Errorf("%d constraint refusal receipts, want 1", n)
	}
	// Changing the mode is receipted.
	if n := f.count(t, "SELECT count(*) FROM receipts WHERE kind = 'setting_change' AND content->'change'->>'setting' = 'permission_mode'"); n != 3 {
		t.Errorf("%d permission mode receipts, want 3 (auto, approve, auto)", n)
	}
}

func TestReceipts_ApprovalsAndExpiryLeaveTheirReceiptsAndEvidence(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	f := newFixtureWith(t, gatedTools(t, &runs))
	ctx := context.Background()
	approver := f.person(t, "approver@example.com", auth.RoleApprover)
	conv := proposals.InConversation(f.conversation(t, "auto"))
	propose := func() proposals.Proposal {
		p, err := f.props.Propose(ctx, f.agent, conv, call("t.send", `{"to": "ana@example.com"}`))
		if err != nil || p.Packet == nil {
			t.Fatalf("propose: %+v %v", p, err)
		}
		return p
	}
	approved, rejected, expired := propose(), propose(), propose()
	if _, _, err := f.props.Approve(ctx, approver, approved.Packet.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.props.RejectApproval(ctx, approver, rejected.Packet.ID, "not now"); err != nil {
		t.Fatal(err)
	}
	f.pool.Exec(ctx, "UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = $1", expired.Packet.ID)
	if _, err := f.props.ExpireApprovals(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p                  proposals.Proposal
		receipts, evidence []string
	}{
		{approved, []string{"execution:approval"}, []string{"approved:0.85"}},
		{rejected, []string{"refusal:rejected"}, []string{"rejected:-1"}},
		{expired, []string{"expiry:expired"}, []string{"held:0"}},
	} {
		if r, e := f.receiptsOf(t, c.p.ID), f.evidenceOf(t, c.p.ID); !equal(r, c.receipts...) || !equal(e, c.evidence...) {
			t.Errorf("receipts %v (want %v), evidence %v (want %v)", r, c.receipts, e, c.evidence)
		}
	}
}

func TestViolation_AnOpenViolationHoldsItsClassForReviewUntilCleared(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := proposals.InConversation(f.conversation(t, "auto"))
	var violation uuid.UUID
	if err := f.pool.QueryRow(ctx, `INSERT INTO trust_violations (workspace_id, action_class, category, reason)
		VALUES ($1, 'tool.call.local', 'wrong_recipient', 'sent to the wrong list') RETURNING id`, f.owner.WorkspaceID).Scan(&violation); err != nil {
		t.Fatal(err)
	}
	p, err := f.props.Propose(ctx, f.agent, conv, call("records.put", `{"collection": "c", "key": "k", "value": {}}`))
	if err != nil || p.Status != proposals.StatusPending || layer(p.Decision, policy.LayerClass).State != policy.StateReviewRequired {
		t.Fatalf("with an open violation: %+v %v", p, err)
	}
	f.pool.Exec(ctx, "UPDATE trust_violations SET cleared_at = now() WHERE id = $1", violation)
	p, err = f.props.Propose(ctx, f.agent, conv, call("records.put", `{"collection": "c", "key": "k", "value": {}}`))
	if err != nil || p.Status != proposals.StatusApplied {
		t.Fatalf("once cleared: %+v %v", p, err)
	}
}
