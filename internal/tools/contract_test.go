package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/policy"
)

func noop(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) { return nil, nil }

// A declaration whose contract does not hold stops the server; the error
// names the tool and says what is wrong.
func TestNewRegistry_RefusesBadContracts(t *testing.T) {
	schema := json.RawMessage(`{"type": "object"}`)
	cases := []struct {
		name string
		tool Tool
		want string
	}{
		{"unknown authority", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: "sometimes", ActionClass: "tool.call.local"}}, "authority class"},
		{"authority against effect", Tool{Effect: policy.EffectRead, Contract: Contract{Authority: policy.AuthorityIrreversible, ActionClass: "read.context"}}, "does not fit effect read"},
		{"non-idempotent without key", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteNonIdempotent, ActionClass: "tool.call.local"}}, "must require an idempotency key"},
		{"irreversible without key", Tool{Effect: policy.EffectDestructive, Contract: Contract{Authority: policy.AuthorityIrreversible, ActionClass: "tool.call.local",
			Gating: Gating{Required: true}}}, "must require an idempotency key"},
		{"irreversible without gating or reason", Tool{Effect: policy.EffectDestructive, Contract: Contract{Authority: policy.AuthorityIrreversible, ActionClass: "tool.call.local",
			Idempotency: Idempotency{Required: true}}}, "needs human gating, or a stated reason"},
		{"unknown class", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "rocket.launch"}}, "not registered"},
		{"bad class", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "Rocket"}}, "action class"},
		{"bad risk", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local", Risk: "extreme"}}, "risk"},
		{"bad threshold", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			Gating: Gating{Threshold: "amount >>> 3"}}}, "gating threshold"},
		{"bad constraint", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			Constraints: []policy.Constraint{{Kind: policy.ConstraintMaxAmount}}}}, "constraints"},
		{"no class rationale", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			ClassRationale: "  "}}, "class rationale"},
		{"a class rationale too short to say why", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			ClassRationale: "because"}}, "class rationale"},
		{"an irreversible tool that says a tool undoes it", Tool{Effect: policy.EffectDestructive, Contract: Contract{Authority: policy.AuthorityIrreversible, ActionClass: "tool.call.local",
			Idempotency: Idempotency{Required: true}, Gating: Gating{Required: true}, Reversibility: "records.put restores it."}}, "None via tools"},
		{"a pii field that is no field name", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			PIIFields: []string{"e mail"}}}, "pii field"},
		{"a pii field twice", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			PIIFields: []string{"to", "to"}}}, "listed twice"},
		{"an availability that is no percentage", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
			SLA: SLA{Availability: "three nines"}}}, "availability"},
		{"computed class without its list", Tool{Effect: policy.EffectMutate, Contract: Contract{Authority: policy.AuthorityWriteIdempotent,
			Classify: func(map[string]any, Workspace) string { return "tool.call.local" }}}, "ActionClasses"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.tool.Name, c.tool.Schema, c.tool.Execute = "bad.tool", schema, noop
			if c.tool.Contract.ClassRationale == "" {
				c.tool.Contract.ClassRationale = "A test tool that says why it is classed so."
			}
			_, err := NewRegistry(policy.DefaultClasses(), c.tool)
			if err == nil || !strings.Contains(err.Error(), "bad.tool") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want it to name bad.tool and say %q", err, c.want)
			}
		})
	}
}

func TestNewRegistry_FillsContractDefaults(t *testing.T) {
	r, err := NewRegistry(policy.DefaultClasses(),
		Tool{Name: "t.read", Effect: policy.EffectRead, Schema: json.RawMessage(`{"type":"object"}`), Execute: noop,
			Contract: Contract{Authority: policy.AuthorityRead, ActionClass: "read.context", ClassRationale: "Pure read: changes nothing."}},
		Tool{Name: "t.gone", Effect: policy.EffectDestructive, Schema: json.RawMessage(`{"type":"object"}`), Execute: noop,
			Contract: Contract{Authority: policy.AuthorityIrreversible, ActionClass: "Payment.Spend", Idempotency: Idempotency{Required: true}, Gating: Gating{Required: true},
				ClassRationale: "Spends money: nothing takes it back."}},
	)
	if err != nil {
		t.Fatal(err)
	}
	read, _ := r.Get("t.read")
	if c := read.Contract; c.Risk != policy.RiskLow || c.Retention.Hours() != 30*24 || c.Gating.ApproverRole != "approver" ||
		c.Reversibility != "Nothing to undo: a read changes nothing." {
		t.Errorf("read defaults: %+v", c)
	}
	gone, _ := r.Get("t.gone")
	c := gone.Contract
	if c.Risk != policy.RiskHigh || c.ActionClass != "payment.initiate" || c.Idempotency.Window.Hours() != 7*24 ||
		c.Retention.Hours() != 10*365*24 || c.Gating.Window.Hours() != 24 || c.Reversibility != "None via tools." {
		t.Errorf("irreversible defaults: %+v", c)
	}
}

// Every built-in tool says why it has its class and how its effect is
// undone (the four-authority-classes doc's class_rationale and
// reversibility), and names the arguments that hold personal data.
func TestBuiltin_EveryContractSaysWhyAndHowItIsUndone(t *testing.T) {
	r, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range r.List() {
		c := tool.Contract
		if len(c.ClassRationale) < minRationale || c.Reversibility == "" {
			t.Errorf("%s: rationale %q, reversibility %q", tool.Name, c.ClassRationale, c.Reversibility)
		}
		if c.Authority == policy.AuthorityIrreversible && !strings.HasPrefix(c.Reversibility, NoneViaTools) {
			t.Errorf("%s is irreversible but its reversibility is %q", tool.Name, c.Reversibility)
		}
	}
	for name, want := range map[string][]string{"email.send": {"to"}, "payment.initiate": {"payee"}, "records.get": recordPII, "records.put": nil} {
		tool, _ := r.Get(name)
		if !slices.Equal(tool.Contract.PIIFields, want) {
			t.Errorf("%s: pii fields %v, want %v", name, tool.Contract.PIIFields, want)
		}
	}
}
