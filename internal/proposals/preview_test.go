package proposals_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

func TestPreview_MatchesWhatHappensOnceTheModeIsRaised(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "")
	scope := proposals.InConversation(conv)
	calls := []proposals.Input{
		call("records.put", `{"collection": "c", "key": "a", "value": {}}`),
		call("records.put", `{"collection": "c", "key": "b", "value": {}}`),
		call("records.put", `{"collection": "c", "key": "c", "value": {}}`),
		call("records.delete", `{"collection": "c", "key": "a"}`),
		call("records.search", `{"query": "a"}`),
	}
	var made []proposals.Proposal
	for _, in := range calls {
		p, err := f.props.Propose(ctx, f.agent, scope, in)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	// The owner applies one put as proposed, edits one, rejects one.
	if _, err := f.props.Apply(ctx, f.owner, made[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Apply(ctx, f.owner, made[1].ID, json.RawMessage(`{"collection": "c", "key": "b2", "value": {}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Reject(ctx, f.owner, made[2].ID, "not this one"); err != nil {
		t.Fatal(err)
	}
	pv, err := f.props.PreviewScope(ctx, f.owner, scope, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Calls != 5 || pv.RanWithoutAsking != 1 || pv.WouldRun != 4 {
		t.Fatalf("preview: %d calls, %d ran without asking, %d would: %+v", pv.Calls, pv.RanWithoutAsking, pv.WouldRun, pv)
	}
	var local proposals.PreviewClass
	for _, c := range pv.Classes {
		if c.ActionClass == "tool.call.local" {
			local = c
		}
	}
	if local.Calls != 4 || local.WouldRun != 3 || local.Newly != 3 || len(local.Overruled) != 2 {
		t.Fatalf("tool.call.local: %+v", local)
	}
	// Nothing ran for the preview.
	if n := f.count(t, "SELECT count(*) FROM proposals"); n != 5 {
		t.Fatalf("%d proposals after a preview", n)
	}
	// Raise the mode and make the same calls: what runs without asking is
	// what the preview said.
	f.setMode(t, conv, "auto")
	ran := 0
	for _, in := range calls {
		in.IdempotencyKey = call("x", "{}").IdempotencyKey
		f.forgetRates(t) // the same calls again: more deletes than the irreversible class's one a minute
		p, err := f.props.Propose(ctx, f.agent, scope, in)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status == proposals.StatusApplied || p.Status == proposals.StatusFailed {
			ran++
		}
	}
	if ran != pv.WouldRun {
		t.Fatalf("%d calls ran without asking once the mode was raised; the preview said %d", ran, pv.WouldRun)
	}
	// Someone else's conversation is not found.
	if _, err := f.props.PreviewScope(ctx, f.other, scope, "auto"); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("another user's preview: %v", err)
	}
	if _, err := f.props.PreviewScope(ctx, f.owner, scope, "yolo"); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("an unknown mode: %v", err)
	}
}

func TestPreview_AWorkspaceSettingForAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.person(t, "admin@example.com", auth.RoleAdmin)
	scope := proposals.InConversation(f.conversation(t, "auto"))
	mail := call("email.send", `{"to": "ana@example.com", "subject": "Hi", "body": "Hello"}`)
	if p, err := f.props.Propose(ctx, f.agent, scope, mail); err != nil || p.Status != proposals.StatusPendingApproval {
		t.Fatalf("high-risk mail: %+v %v", p, err)
	}
	pv, err := f.props.PreviewWorkspace(ctx, admin, "auto_approve_high_risk", true)
	if err != nil || pv.WouldRun != 1 || pv.RanWithoutAsking != 0 {
		t.Fatalf("preview: %+v %v", pv, err)
	}
	if _, err := f.props.PreviewWorkspace(ctx, f.owner, "auto_approve_high_risk", true); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("a member's preview: %v", err)
	}
	f.setWorkspace(t, "auto_approve_high_risk = true")
	mail.IdempotencyKey = call("x", "{}").IdempotencyKey
	if p, err := f.props.Propose(ctx, f.agent, scope, mail); err != nil || p.Status != proposals.StatusApplied {
		t.Fatalf("once raised: %+v %v", p, err)
	}
}
