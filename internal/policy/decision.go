package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// State is the outcome of a decision layer, and of the decision as a whole.
type State string

// States, least to most strict.
const (
	StateAllowed                State = "allowed"
	StateAllowedWithConstraints State = "allowed_with_constraints"
	StateReviewRequired         State = "review_required"
	StateDeferred               State = "deferred"
	StateHumanOnly              State = "human_only"
	StateBlocked                State = "blocked"
)

// States lists every state, least to most strict; a state's index is its
// rank.
var States = []State{
	StateAllowed, StateAllowedWithConstraints, StateReviewRequired,
	StateDeferred, StateHumanOnly, StateBlocked,
}

// Rank is the strictness of s, 0 (allowed) to 5 (blocked). An unknown state
// ranks as blocked, so it can only ever tighten a decision.
func (s State) Rank() int {
	if i := slices.Index(States, s); i >= 0 {
		return i
	}
	return len(States) - 1
}

// Strictest is the strictest of states. With no states it is StateAllowed,
// the identity of "strictest of"; an unknown state counts as StateBlocked.
func Strictest(states ...State) State {
	rank := 0
	for _, s := range states {
		rank = max(rank, s.Rank())
	}
	return States[rank]
}

// Authority is a tool's declared authority class: how much a call can change
// and whether it can be undone.
type Authority string

// Authority classes.
const (
	AuthorityRead               Authority = "read"
	AuthorityWriteIdempotent    Authority = "write-idempotent"
	AuthorityWriteNonIdempotent Authority = "write-non-idempotent"
	AuthorityIrreversible       Authority = "irreversible"
)

// Valid reports whether a is a known authority class.
func (a Authority) Valid() bool {
	switch a {
	case AuthorityRead, AuthorityWriteIdempotent, AuthorityWriteNonIdempotent, AuthorityIrreversible:
		return true
	}
	return false
}

// Risk is a call's risk, the effect axis as the risk gate names it.
type Risk string

// Risks, least to most dangerous.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Valid reports whether r is a known risk (exactly: "High" is not).
func (r Risk) Valid() bool { return r == RiskLow || r == RiskMedium || r == RiskHigh }

// DefaultRisk is the risk of a tool that declares only its effect. An
// unknown effect is high risk: it fails closed.
func DefaultRisk(e Effect) Risk {
	switch e {
	case EffectRead:
		return RiskLow
	case EffectMutate:
		return RiskMedium
	}
	return RiskHigh
}

// ScopeKind is where a call was proposed.
type ScopeKind string

// Scopes.
const (
	ScopeConversation ScopeKind = "conversation"
	ScopeNotebook     ScopeKind = "notebook"
)

// Layer names, as they appear in Verdict.Layer, in the order Decide runs
// them.
const (
	LayerScope       = "scope"
	LayerContract    = "contract"
	LayerRisk        = "risk"
	LayerClass       = "class"
	LayerConstraints = "constraints"
	LayerToken       = "token"
)

// Verdict is one layer's state and, always, a one-sentence reason.
type Verdict struct {
	Layer  string `json:"layer"`
	State  State  `json:"state"`
	Reason string `json:"reason"`
}

// Call is everything the decision layers read, already resolved by the
// caller from the tool's declaration, the scope row and the workspace.
type Call struct {
	// Scope is where the call was proposed.
	Scope ScopeKind `json:"scope"`
	// Effect is the tool's declared effect.
	Effect Effect `json:"effect"`
	// Mode is the conversation's permission mode (conversations only).
	Mode PermissionMode `json:"mode,omitempty"`
	// Trust is the notebook's trust level (notebooks only).
	Trust TrustLevel `json:"trust,omitempty"`
	// Risk is the call's risk; DefaultRisk gives it from the effect.
	Risk Risk `json:"risk"`
	// ActionClass is the canonical action class, "" when the call could not
	// be classified.
	ActionClass string `json:"action_class"`
	// HumanGated is set when the tool's contract requires a human.
	HumanGated bool `json:"human_gated"`
	// ThresholdExceeded is set when the contract's threshold (e.g.
	// amount > 10000) is exceeded by the arguments.
	ThresholdExceeded bool `json:"threshold_exceeded"`
	// ApproverRole names who approves a deferred call, for the reason text.
	ApproverRole string `json:"approver_role,omitempty"`
	// AutoApproveHighRisk is the workspace setting; false by default.
	AutoApproveHighRisk bool `json:"auto_approve_high_risk"`
	// ConfirmedHighRisk: the caller sent confirm: true with a high-risk
	// call, and the workspace lets that stand in for an approver
	// (confirm_runs_high_risk). It waives the risk gate only.
	ConfirmedHighRisk bool `json:"confirmed_high_risk,omitempty"`
	// OpenViolation is set when the action class has an open trust
	// violation.
	OpenViolation bool `json:"open_violation"`
	// Constraints names the constraints that will apply at execution, from
	// the declaration or an approval.
	Constraints []string `json:"constraints"`
	// Tool is the tool's name, for the token layer.
	Tool string `json:"tool,omitempty"`
	// TokenScope narrows what the caller's API token may call; nil for a
	// browser session or an unscoped token.
	TokenScope *TokenScope `json:"token_scope,omitempty"`

	// Grants (grant.go): the scope's live grants, read with its row, the
	// tool's authority class, and the facts grant bounds are checked
	// against. Not kept with the call's inputs: a past call is decided
	// again (the shadow preview) under settings, not grants.
	Grants     []Grant   `json:"-"`
	Authority  Authority `json:"-"`
	GrantFacts Facts     `json:"-"`
}

// TokenScope is what an API token may call: only the listed tools (nil:
// every tool; empty: none) and, when ReadOnly, only reads.
type TokenScope struct {
	Tools    []string `json:"tools"`
	ReadOnly bool     `json:"read_only"`
}

// Allows reports whether the scope lets a call to tool, of that effect,
// through: a nil scope allows everything; an unknown effect is not a read.
func (ts *TokenScope) Allows(tool string, effect Effect) bool {
	if ts == nil {
		return true
	}
	return (ts.Tools == nil || slices.Contains(ts.Tools, tool)) && (!ts.ReadOnly || effect == EffectRead)
}

// ScopeLayer is the scope gate. In a conversation it follows
// DecideToolDisposition: auto-run and auto-apply are allowed, propose is
// review_required. In a notebook it follows GateAction: auto is allowed,
// anything else (confirm, gated, an error) is review_required. An unknown
// scope is blocked.
func ScopeLayer(c Call) Verdict {
	switch c.Scope {
	case ScopeConversation:
		return conversationScope(c)
	case ScopeNotebook:
		return notebookScope(c)
	}
	return Verdict{LayerScope, StateBlocked, fmt.Sprintf("Scope %q is not known, so the call is blocked.", c.Scope)}
}

func conversationScope(c Call) Verdict {
	allowed := func(reason string) Verdict { return Verdict{LayerScope, StateAllowed, reason} }
	review := func(reason string) Verdict { return Verdict{LayerScope, StateReviewRequired, reason} }
	switch DecideToolDisposition(c.Effect, c.Mode) {
	case AutoRun:
		return allowed("Reads run at once in a conversation.")
	case AutoApply:
		return allowed("The conversation is in auto mode, so this change applies at once.")
	}
	switch {
	case c.Effect == EffectDestructive:
		return review("Destructive calls always need a person's confirmation, whatever the permission mode.")
	case c.Effect != EffectMutate:
		return review(fmt.Sprintf("Effect %q is not known, so the call waits for the owner's confirmation.", c.Effect))
	case c.Mode == ModeApprove:
		return review("The conversation is in approve mode, so this change waits for the owner's confirmation.")
	}
	return review(fmt.Sprintf("Permission mode %q is not known, so this change waits for the owner's confirmation.", c.Mode))
}

func notebookScope(c Call) Verdict {
	gate, err := GateAction(TierOf(c.Effect), c.Trust)
	switch {
	case !c.Trust.Valid():
		return Verdict{LayerScope, StateReviewRequired, fmt.Sprintf("Trust level %q is not known, so the cell waits for its owner's confirmation.", c.Trust)}
	case err != nil:
		return Verdict{LayerScope, StateReviewRequired, fmt.Sprintf("Effect %q is not known, so the cell waits for its owner's confirmation.", c.Effect)}
	case gate == GateAuto:
		return Verdict{LayerScope, StateAllowed, fmt.Sprintf("The notebook is %s, so a %s cell runs at once.", c.Trust, TierOf(c.Effect))}
	}
	return Verdict{LayerScope, StateReviewRequired, fmt.Sprintf("The notebook is %s, so a %s cell waits for its owner's confirmation.", c.Trust, TierOf(c.Effect))}
}

// ContractLayer is the contract gate: a human-gated call, or one over its
// contract's threshold, is deferred to an approver.
func ContractLayer(c Call) Verdict {
	approver := "an approver"
	if c.ApproverRole != "" {
		approver = "the " + c.ApproverRole + " role"
	}
	switch {
	case c.HumanGated:
		return Verdict{LayerContract, StateDeferred, "The tool's contract requires approval by " + approver + "."}
	case c.ThresholdExceeded:
		return Verdict{LayerContract, StateDeferred, "The call exceeds its contract's threshold, so it needs approval by " + approver + "."}
	}
	return Verdict{LayerContract, StateAllowed, "The tool's contract does not require a human for this call."}
}

// RiskLayer is the risk gate: a high-risk call is deferred unless the
// workspace auto-approves high risk. An unknown risk is deferred too: it
// fails closed.
func RiskLayer(c Call) Verdict {
	switch {
	case !c.Risk.Valid():
		return Verdict{LayerRisk, StateDeferred, fmt.Sprintf("Risk %q is not known, so the call waits for an approver.", c.Risk)}
	case c.Risk == RiskHigh && c.ConfirmedHighRisk && !c.AutoApproveHighRisk:
		return Verdict{LayerRisk, StateAllowed, "The caller confirmed this high-risk call (confirm: true), which the workspace lets stand in for an approver."}
	case c.Risk == RiskHigh && !c.AutoApproveHighRisk:
		return Verdict{LayerRisk, StateDeferred, "High-risk calls wait for an approver unless the workspace auto-approves them."}
	case c.Risk == RiskHigh:
		return Verdict{LayerRisk, StateAllowed, "The workspace auto-approves high-risk calls."}
	}
	return Verdict{LayerRisk, StateAllowed, "The call's risk is " + string(c.Risk) + "."}
}

// ClassLayer is the class gate: a call whose action class is empty or not
// in classes is blocked, a human-only class is human_only, and an open trust
// violation on the class needs review. A nil registry knows no class, so it
// blocks every call.
func ClassLayer(c Call, classes *ClassRegistry) Verdict {
	if c.ActionClass == "" {
		return Verdict{LayerClass, StateBlocked, "The call cannot be classified, so it is blocked."}
	}
	group, ok := classes.Group(c.ActionClass)
	switch {
	case !ok:
		return Verdict{LayerClass, StateBlocked, fmt.Sprintf("Action class %q cannot be classified, so the call is blocked.", c.ActionClass)}
	case group == GroupHumanOnly:
		return Verdict{LayerClass, StateHumanOnly, fmt.Sprintf("Action class %q is human-only: only the principal can perform it.", c.ActionClass)}
	case c.OpenViolation:
		return Verdict{LayerClass, StateReviewRequired, fmt.Sprintf("Action class %q has an open trust violation, so the call needs review until the principal clears it.", c.ActionClass)}
	}
	// Concatenated, not formatted (%q is strconv.Quote): on every call.
	return Verdict{LayerClass, StateAllowed, "Action class " + strconv.Quote(c.ActionClass) + " is in group " + string(group) + "."}
}

// ConstraintLayer turns allowed into allowed_with_constraints when any
// constraint applies. A requires_witness constraint defers the call: only
// the approval path can bring two approvers. It never returns anything
// looser than allowed, so combined by Strictest it cannot loosen another
// layer.
func ConstraintLayer(c Call) Verdict {
	if len(c.Constraints) == 0 {
		return Verdict{LayerConstraints, StateAllowed, "No constraints apply."}
	}
	if slices.Contains(c.Constraints, ConstraintRequiresWitness) {
		return Verdict{LayerConstraints, StateDeferred, "The call requires a witness: two approvers other than the proposer and the owner."}
	}
	return Verdict{LayerConstraints, StateAllowedWithConstraints, "The call runs under constraints: " + strings.Join(c.Constraints, ", ") + "."}
}

// TokenLayer is the token's scope: a call to a tool outside the token's
// tools, or a call that is not a read from a read-only token (an unknown
// effect included), is blocked. A call without a scoped token is allowed
// here, so the layer can only tighten.
func TokenLayer(c Call) Verdict {
	ts := c.TokenScope
	switch {
	case ts == nil:
		return Verdict{LayerToken, StateAllowed, "The call is not made with a scoped token."}
	case ts.Allows(c.Tool, c.Effect):
		return Verdict{LayerToken, StateAllowed, "The call is within the token's scope."}
	case ts.Tools != nil && !slices.Contains(ts.Tools, c.Tool):
		tools := "no tools"
		if len(ts.Tools) > 0 {
			tools = "the tools " + strings.Join(ts.Tools, ", ")
		}
		return Verdict{LayerToken, StateBlocked, fmt.Sprintf("The token's scope allows only %s, so a call to %q is blocked.", tools, c.Tool)}
	}
	return Verdict{LayerToken, StateBlocked, fmt.Sprintf("The token's scope is read-only, so a %s call is blocked.", c.Effect)}
}

// Holding are the verdicts of the layers that did not simply allow the
// call (what held it back, or allowed it only with constraints), in order:
// what a refusal, a notification or a link's page says of why.
func (d Decision) Holding() []Verdict {
	var out []Verdict
	for _, l := range d.Layers {
		if l.State != StateAllowed {
			out = append(out, l)
		}
	}
	return out
}

// Decision is the outcome of Decide: the final state, how the call reaches
// effect, every layer's verdict in order, and the constraints to check at
// execution.
type Decision struct {
	State       State     `json:"state"`
	Disposition string    `json:"disposition"`
	Layers      []Verdict `json:"layers"`
	Constraints []string  `json:"constraints"`
	// Bounds are the constraints named in Constraints with their values
	// (the allowlist, the amount, the window), when the caller that took
	// the decision recorded them (Decide does not: it sees only names).
	// The protocol's shape (TGPOf) reads them.
	Bounds []Constraint `json:"bounds,omitempty"`
	// ActionClass is the class the call was decided as (computed from the
	// arguments it was decided on).
	ActionClass string `json:"action_class,omitempty"`
	// Grant is the grant that allowed the call instead of a person (nil:
	// none did).
	Grant *GrantUse `json:"grant,omitempty"`
}

// Decide runs the scope, contract, risk, class, constraint and token
// layers in that order; the final state is the strictest layer's, so no layer can
// loosen another. The disposition follows from the final state:
//
//	state                        conversation          notebook
//	allowed / with constraints   auto-run | auto-apply  auto
//	review_required              propose               confirm
//	deferred                     defer                 defer
//	human_only                   human_only            human_only
//	blocked                      blocked               blocked
//
// In a conversation the allowed disposition is DecideToolDisposition's, so
// auto-apply is reachable only through (mutate, auto).
//
// When the call's scope has live grants (c.Grants), a seventh layer, the
// grant layer (grant.go), runs last: the one exception to "only tighten",
// it may let a call that waits for a person through instead, with the
// disposition "grant" and the grant named in Decision.Grant.
func Decide(c Call, classes *ClassRegistry) Decision {
	layers := []Verdict{ScopeLayer(c), ContractLayer(c), RiskLayer(c), ClassLayer(c, classes), ConstraintLayer(c), TokenLayer(c)}
	states := make([]State, len(layers))
	for i, v := range layers {
		states[i] = v.State
	}
	state := Strictest(states...)
	d := Decision{
		State:       state,
		Disposition: dispositionOf(c, state),
		Layers:      layers,
		Constraints: slices.Clone(c.Constraints),
		ActionClass: c.ActionClass,
	}
	if len(c.Grants) > 0 {
		decideGrant(c, classes, &d)
	}
	return d
}

// dispositionOf maps a final state to a disposition; see Decide. An allowed
// final state implies the scope layer allowed the call, which an unknown
// scope never does.
func dispositionOf(c Call, s State) string {
	switch s {
	case StateAllowed, StateAllowedWithConstraints:
		if c.Scope == ScopeNotebook {
			return string(GateAuto)
		}
		return string(DecideToolDisposition(c.Effect, c.Mode))
	case StateReviewRequired:
		if c.Scope == ScopeNotebook {
			return string(GateConfirm)
		}
		return string(Propose)
	case StateDeferred:
		return "defer"
	case StateHumanOnly:
		return "human_only"
	}
	return "blocked"
}
