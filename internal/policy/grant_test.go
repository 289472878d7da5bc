package policy

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var grantExpiry = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// ownerGrant is the owner's grant of 3 calls of records.put.
func ownerGrant() Grant {
	return Grant{ID: "g-owner", GrantedBy: "ana@example.com", Tool: "records.put", Ceiling: StateReviewRequired,
		Remaining: 3, MaxCalls: 3, ExpiresAt: grantExpiry}
}

// approverGrant is an approver's grant of 5 calls of class proposal.submit
// for packets of the approver role.
func approverGrant() Grant {
	return Grant{ID: "g-approver", GrantedBy: "boss@example.com", ActionClass: "proposal.submit", Ceiling: StateDeferred,
		Role: "approver", Remaining: 2, MaxCalls: 5, ExpiresAt: grantExpiry}
}

// heldByOwner is a change in a conversation in approve mode: a card.
func heldByOwner() Call {
	return Call{Scope: ScopeConversation, Effect: EffectMutate, Mode: ModeApprove, Risk: RiskMedium, ActionClass: "tool.call.local",
		Tool: "records.put", Authority: AuthorityWriteIdempotent, Grants: []Grant{ownerGrant()}}
}

// heldByApprover is a high-risk send: a packet for an approver.
func heldByApprover() Call {
	return Call{Scope: ScopeConversation, Effect: EffectMutate, Mode: ModeApprove, Risk: RiskHigh, ActionClass: "proposal.submit",
		Tool: "t.send", Authority: AuthorityWriteNonIdempotent, ApproverRole: "approver", Grants: []Grant{approverGrant()}}
}

func TestGrantLayer_CoversOnlyWhatWaitsForItsGrantor(t *testing.T) {
	amount := func(v float64) *float64 { return &v }
	with := func(c Call, f func(*Call)) Call {
		c.Grants = slices.Clone(c.Grants)
		f(&c)
		return c
	}
	cases := []struct {
		name   string
		call   Call
		state  State
		grant  string // the grant that allowed it ("": none)
		reason string
	}{
		{"owner's grant covers the owner's card", heldByOwner(), StateAllowed, "g-owner",
			"Grant g-owner by ana@example.com allows this call instead of waiting for the owner's confirmation: 2 of its 3 calls left after this one, until 2030-01-02T03:04:05Z."},
		{"approver's grant covers a packet of its role", heldByApprover(), StateAllowed, "g-approver",
			"Grant g-approver by boss@example.com allows this call instead of waiting for an approver: 1 of its 5 calls left"},
		{"a notebook's confirm cell", with(heldByOwner(), func(c *Call) { c.Scope, c.Trust = ScopeNotebook, TrustCautious }), StateAllowed, "g-owner", "Grant g-owner"},
		{"the class, not the tool", with(heldByOwner(), func(c *Call) { c.Grants[0].Tool, c.Grants[0].ActionClass = "", "tool.call.local" }), StateAllowed, "g-owner", "Grant g-owner"},
		{"not needed when allowed", with(heldByOwner(), func(c *Call) { c.Mode = ModeAuto }), StateAllowed, "", "No grant is needed"},
		{"another tool", with(heldByOwner(), func(c *Call) { c.Tool = "notes.append" }), StateReviewRequired, "", `No grant here covers tool "notes.append"`},
		{"used up", with(heldByOwner(), func(c *Call) { c.Grants[0].Remaining = 0 }), StateReviewRequired, "", "g-owner is used up"},
		{"destructive", with(heldByOwner(), func(c *Call) { c.Effect = EffectDestructive }), StateReviewRequired, "", "destructive calls are never granted"},
		{"unknown effect", with(heldByOwner(), func(c *Call) { c.Effect = "Mutate" }), StateReviewRequired, "", "never granted"},
		{"irreversible", with(heldByOwner(), func(c *Call) { c.Authority = AuthorityIrreversible }), StateReviewRequired, "", "irreversible calls are never granted"},
		{"human-only", with(heldByOwner(), func(c *Call) {
			c.ActionClass = "payment.initiate"
			c.Grants[0].Tool = ""
			c.Grants[0].ActionClass = "payment.initiate"
		}),
			StateHumanOnly, "", "never loosens a human-only call"},
		{"blocked by the token", with(heldByOwner(), func(c *Call) { c.TokenScope = &TokenScope{Tools: []string{"records.get"}} }), StateBlocked, "", "never loosens a blocked call"},
		{"an open violation", with(heldByOwner(), func(c *Call) { c.OpenViolation = true }), StateReviewRequired, "", "No grant stands in for the class layer"},
		{"a witness", with(heldByApprover(), func(c *Call) { c.Constraints = []string{ConstraintRequiresWitness} }), StateDeferred, "", "No grant stands in for the constraints layer"},
		{"the owner's grant is no approver", with(heldByApprover(), func(c *Call) { c.Grants[0].Ceiling, c.Grants[0].Role = StateReviewRequired, "" }),
			StateDeferred, "", "it does not stand in for an approver"},
		{"an approver's grant is no owner", with(heldByOwner(), func(c *Call) { c.Grants[0].Ceiling, c.Grants[0].Role = StateDeferred, "approver" }),
			StateReviewRequired, "", "does not stand in for the owner's confirmation"},
		{"another role", with(heldByApprover(), func(c *Call) { c.ApproverRole = "finance-approver" }), StateDeferred, "", "waits for the finance-approver role"},
		{"within its bounds", with(heldByApprover(), func(c *Call) {
			c.Grants[0].Bounds = []Constraint{{Kind: ConstraintMaxAmount, Amount: 500}}
			c.GrantFacts = Facts{Amount: amount(499)}
		}), StateAllowedWithConstraints, "g-approver", "Grant g-approver"},
		{"over its bounds", with(heldByApprover(), func(c *Call) {
			c.Grants[0].Bounds = []Constraint{{Kind: ConstraintMaxAmount, Amount: 500}}
			c.GrantFacts = Facts{Amount: amount(501)}
		}), StateDeferred, "", "bounded: constraint max_amount: amount 501 is over 500"},
		{"a bound with nothing to check", with(heldByApprover(), func(c *Call) {
			c.Grants[0].Bounds = []Constraint{{Kind: ConstraintRecipientAllowlist, Values: []string{"example.com"}}}
		}), StateDeferred, "", "no recipient to check"},
		{"the second grant covers", with(heldByOwner(), func(c *Call) {
			used := ownerGrant()
			used.ID, used.Remaining = "g-used", 0
			c.Grants = []Grant{used, ownerGrant()}
		}), StateAllowed, "g-owner", "Grant g-owner"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.call, DefaultClasses())
			if d.State != c.state {
				t.Fatalf("state %s, want %s; layers %+v", d.State, c.state, d.Layers)
			}
			last := d.Layers[len(d.Layers)-1]
			if len(d.Layers) != 7 || last.Layer != LayerGrant || !strings.Contains(last.Reason, c.reason) || last.State != StateAllowed {
				t.Fatalf("grant layer %+v, want a reason with %q", last, c.reason)
			}
			switch {
			case c.grant == "" && (d.Grant != nil || d.Disposition == DispositionGrant):
				t.Errorf("allowed by grant %+v with disposition %s", d.Grant, d.Disposition)
			case c.grant != "" && (d.Grant == nil || d.Grant.ID != c.grant || d.Disposition != DispositionGrant):
				t.Errorf("grant %+v, disposition %s; want grant %s", d.Grant, d.Disposition, c.grant)
			}
		})
	}
}

// Without grants there is no grant layer: the six layers alone decide.
func TestDecide_NoGrantsNoGrantLayer(t *testing.T) {
	c := heldByOwner()
	c.Grants = nil
	d := Decide(c, DefaultClasses())
	if len(d.Layers) != 6 || d.State != StateReviewRequired || d.Grant != nil {
		t.Fatalf("%+v", d)
	}
}

// The grant layer loosens only what it may: whatever the call and its
// grants, the decision with grants is the one without them, except a
// review_required or deferred call turned allowed by a grant of that very
// ceiling (and role), that names it; and never a destructive, irreversible,
// human-only, blocked, witnessed or violation-held call.
func TestDecide_GrantsLoosenOnlyWaitingCalls(t *testing.T) {
	reg, err := NewClassRegistry(map[string]ClassGroup{"crm.note.add": GroupInternal, "bank.wire.send": GroupHumanOnly})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	loosened := map[State]int{}
	for i := range 20000 {
		c := randomCall(r, reg.Classes())
		c.Authority = []Authority{AuthorityRead, AuthorityWriteIdempotent, AuthorityWriteNonIdempotent, AuthorityIrreversible, ""}[r.IntN(5)]
		for range r.IntN(3) + 1 {
			g := Grant{ID: "g", GrantedBy: "x@example.com", Ceiling: []State{StateReviewRequired, StateDeferred, StateAllowed, StateBlocked}[r.IntN(4)],
				Role: []string{"", "approver", "finance"}[r.IntN(3)], Remaining: r.IntN(3), MaxCalls: 3, ExpiresAt: grantExpiry}
			if r.IntN(2) == 0 {
				g.Tool = c.Tool
			} else {
				g.ActionClass = c.ActionClass
			}
			c.Grants = append(c.Grants, g)
		}
		without := c
		without.Grants = nil
		before, after := Decide(without, reg), Decide(c, reg)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("call %d %+v:\nwithout %+v\nwith %+v: "+format, append([]any{i, c, before, after}, args...)...)
		}
		if !slices.Equal(before.Layers, after.Layers[:6]) || after.Layers[6].Layer != LayerGrant || after.Layers[6].State != StateAllowed {
			fail("the six layers changed, or the grant layer tightened")
		}
		if after.State == before.State {
			if after.Grant != nil || after.Disposition != before.Disposition {
				fail("a grant is named though nothing was loosened")
			}
			continue
		}
		loosened[before.State]++
		g := after.Grant
		role := c.ApproverRole
		if role == "" {
			role = "approver"
		}
		switch {
		case before.State != StateReviewRequired && before.State != StateDeferred:
			fail("a %s call was loosened", before.State)
		case after.State.Rank() > StateAllowedWithConstraints.Rank():
			fail("loosened to %s", after.State)
		case g == nil || after.Disposition != DispositionGrant || !strings.Contains(after.Layers[6].Reason, "Grant "+g.ID):
			fail("loosened without naming the grant")
		case c.Effect != EffectRead && c.Effect != EffectMutate, c.Authority == AuthorityIrreversible:
			fail("a %s %s call was granted", c.Effect, c.Authority)
		case c.OpenViolation || slices.Contains(c.Constraints, ConstraintRequiresWitness):
			fail("a violation or a witness was granted away")
		case before.State == StateDeferred && !slices.ContainsFunc(c.Grants, func(x Grant) bool {
			return x.Ceiling == StateDeferred && x.Role == role && x.Remaining > 0
		}):
			fail("an approver's packet loosened without an approver's grant of its role")
		case before.State == StateReviewRequired && !slices.ContainsFunc(c.Grants, func(x Grant) bool {
			return x.Ceiling == StateReviewRequired && x.Remaining > 0
		}):
			fail("an owner's card loosened without the owner's grant")
		}
		if grp, _ := reg.Group(c.ActionClass); grp == GroupHumanOnly {
			fail("a human-only class was granted")
		}
	}
	if loosened[StateReviewRequired] == 0 || loosened[StateDeferred] == 0 {
		t.Errorf("the draw loosened too little to prove anything: %v", loosened)
	}
}

func TestUngrantable(t *testing.T) {
	classes := DefaultClasses()
	for _, c := range []struct {
		effect    Effect
		authority Authority
		class     string
		want      string
	}{
		{EffectMutate, AuthorityWriteIdempotent, "tool.call.local", ""},
		{EffectRead, AuthorityRead, "read.context", ""},
		{EffectDestructive, AuthorityWriteNonIdempotent, "tool.call.local", "destructive"},
		{EffectMutate, AuthorityIrreversible, "tool.call.local", "irreversible"},
		{EffectMutate, AuthorityWriteNonIdempotent, "payment.initiate", "payments"},
		{"", AuthorityRead, "read.context", "never granted"},
	} {
		if got := Ungrantable(c.effect, c.authority, c.class, classes); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Ungrantable(%s, %s, %s) = %q, want %q", c.effect, c.authority, c.class, got, c.want)
		}
	}
	if UngrantableClass("payment.initiate", classes) == "" || UngrantableClass("nope.nope", classes) == "" || UngrantableClass("email.send.external", classes) != "" {
		t.Error("UngrantableClass")
	}
}
