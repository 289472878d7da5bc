package proposals_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// In strict mode a short rationale is refused first, whatever else is
// wrong, as before warn mode existed; in warn mode the call goes on to the
// other checks, and runs with the warning.
func TestPropose_ShortRationaleIsRefusedFirstInStrictModeOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "auto")
	noKey := proposals.Input{Tool: "notes.append", Arguments: json.RawMessage(`{"collection":"c","key":"k","text":"x"}`), Rationale: "why"}
	badArgs := proposals.Input{Tool: "records.get", Arguments: json.RawMessage(`{"nope":1}`), Rationale: ""}
	short := proposals.Input{Tool: "records.put", Arguments: json.RawMessage(`{"collection":"c","key":"k","value":{}}`)}
	fieldOf := func(err error) string {
		var ae *apperr.Error
		if err == nil || !errors.As(err, &ae) || len(ae.Fields) == 0 {
			return ""
		}
		return ae.Fields[0].Field
	}
	// Someone else's conversation, short rationale: the rationale is named, not 404.
	for name, tc := range map[string]struct {
		scope proposals.Scope
		in    proposals.Input
	}{"missing key": {proposals.InConversation(conv), noKey}, "bad arguments": {proposals.InConversation(conv), badArgs},
		"not found": {proposals.InConversation(uuid.New()), short}, "alone": {proposals.InConversation(conv), short}} {
		_, err := f.props.Propose(ctx, f.agent, tc.scope, tc.in)
		if apperr.Code(err) != apperr.EINVALID || fieldOf(err) != "rationale" {
			t.Errorf("strict, %s: %v", name, err)
		}
	}
	if _, err := f.pool.Exec(ctx, "UPDATE workspaces SET rationale_mode = 'warn', rationale_warn_until = now() + interval '1 day'"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), noKey); apperr.Code(err) != apperr.EBADREQ || fieldOf(err) != "idempotency_key" {
		t.Errorf("warn, missing key: %v", err)
	}
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), short)
	if err != nil || p.RationaleWarning == "" || p.Status != proposals.StatusApplied {
		t.Errorf("warn, alone: %v %q %s", err, p.RationaleWarning, p.Status)
	}
}
