package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Grants. A person who approves a call may also allow similar calls for a
// while ("approve and allow similar for 30 minutes, 3 calls"): a grant.
// The grant layer is the one layer that loosens: a call that waits for a
// person (review_required for the scope's owner, deferred for an approver)
// and that a live grant covers is allowed by it instead. It never loosens
// anything else: a block, a human-only state, a broken constraint, a
// witness, an open violation or a token's scope still hold, and a
// destructive, irreversible, human-only or payment call is never covered.
// It runs only when the call's scope has live grants (Call.Grants), so a
// call without any is decided by the six layers alone.

// LayerGrant is the grant layer's name in Verdict.Layer.
const LayerGrant = "grant"

// DispositionGrant is the disposition of a call a grant lets through.
const DispositionGrant = "grant"

// GrantBoundKinds are the constraints a grant may bound its calls by: those
// that read a call's arguments.
var GrantBoundKinds = []string{ConstraintMaxAmount, ConstraintRecipientAllowlist, ConstraintDomainAllowlist, ConstraintInternalOnly}

// Grant is a live grant over the call's scope, as the decision reads it
// from the database in the call's transaction.
type Grant struct {
	ID string `json:"id"`
	// GrantedBy names who granted it: their id as the decision reads it,
	// their email once the grant is used (or when a caller names them).
	GrantedBy string `json:"granted_by"`
	// Exactly one of Tool and ActionClass is set: what it covers.
	Tool        string `json:"tool,omitempty"`
	ActionClass string `json:"action_class,omitempty"`
	// Ceiling is the state it lets through instead of a person:
	// review_required (the owner's grant, for their confirm card) or
	// deferred (an approver's, for a packet that waits for Role).
	Ceiling State  `json:"ceiling"`
	Role    string `json:"role,omitempty"`
	// Bounds must all hold for the call's arguments (GrantBoundKinds).
	Bounds    []Constraint `json:"bounds,omitempty"`
	Remaining int          `json:"remaining"`
	MaxCalls  int          `json:"max_calls"`
	ExpiresAt time.Time    `json:"expires_at"`
}

// GrantUse is what a decision says of the grant that allowed its call.
type GrantUse struct {
	ID        string `json:"id"`
	GrantedBy string `json:"granted_by"`
	// Left is how many calls the grant has after this one.
	Left      int       `json:"left"`
	MaxCalls  int       `json:"max_calls"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Ungrantable says why calls of this kind can never be granted, "" when
// they can: destructive (or of an unknown effect), irreversible,
// human-only and payment calls always wait for a person.
func Ungrantable(effect Effect, authority Authority, class string, classes *ClassRegistry) string {
	switch {
	case effect == EffectDestructive:
		return "destructive calls are never granted"
	case effect != EffectRead && effect != EffectMutate:
		return fmt.Sprintf("calls of effect %q are never granted", effect)
	case authority == AuthorityIrreversible:
		return "irreversible calls are never granted"
	case isPayment(class):
		return "payments are never granted"
	}
	if g, ok := classes.Group(class); ok && g == GroupHumanOnly {
		return "human-only calls are never granted"
	}
	return ""
}

// UngrantableClass says why a grant for an action class can never apply,
// "" when it can: a human-only or payment class, or one not known.
func UngrantableClass(class string, classes *ClassRegistry) string {
	g, ok := classes.Group(class)
	switch {
	case !ok:
		return fmt.Sprintf("action class %q is not known", class)
	case g == GroupHumanOnly, isPayment(class):
		return "human-only and payment classes are never granted"
	}
	return ""
}

func isPayment(class string) bool { return class == "payment" || strings.HasPrefix(class, "payment.") }

// GrantBoundsHold reports, as an error that names the bound, whether
// bounds hold for a call with these facts. A bound the call gives nothing
// to check (max_amount on a call without an amount, an allowlist on a
// call that reaches no address) does not hold: it fails closed.
func GrantBoundsHold(bounds []Constraint, f Facts) error {
	for _, b := range bounds {
		why := ""
		switch b.Kind {
		case ConstraintMaxAmount:
			if f.Amount == nil {
				why = "the call has no amount to check"
			}
		case ConstraintRecipientAllowlist:
			if len(f.Recipients) == 0 {
				why = "the call has no recipient to check"
			}
		case ConstraintDomainAllowlist, ConstraintInternalOnly:
			if len(f.Recipients)+len(f.URLs) == 0 {
				why = "the call reaches no address to check"
			}
		default:
			why = "it is not a bound a grant may have"
		}
		if why != "" {
			return &Violation{Constraint: b.Kind, Reason: why}
		}
	}
	return Check(bounds, f)
}

// GrantLayer decides whether a live grant lets the call through instead
// of a person, given the other layers' verdicts and their strictest state.
// It returns its verdict (never stricter than allowed: it cannot tighten)
// and the grant that covers the call, or nil.
func GrantLayer(c Call, classes *ClassRegistry, layers []Verdict, held State) (Verdict, *Grant) {
	no := func(reason string) (Verdict, *Grant) { return Verdict{LayerGrant, StateAllowed, reason}, nil }
	switch held {
	case StateAllowed, StateAllowedWithConstraints:
		return no("No grant is needed: the call does not wait for a person.")
	case StateReviewRequired, StateDeferred:
	default:
		return no(fmt.Sprintf("A grant never loosens a %s call.", strings.ReplaceAll(string(held), "_", "-")))
	}
	if why := Ungrantable(c.Effect, c.Authority, c.ActionClass, classes); why != "" {
		return no("No grant applies: " + why + ".")
	}
	for _, v := range layers {
		if v.State.Rank() <= StateAllowedWithConstraints.Rank() {
			continue
		}
		coverable := (v.Layer == LayerScope && v.State == StateReviewRequired) ||
			((v.Layer == LayerContract || v.Layer == LayerRisk) && v.State == StateDeferred)
		if !coverable {
			return no("No grant stands in for the " + v.Layer + " layer: " + v.Reason)
		}
	}
	role := c.ApproverRole
	if role == "" {
		role = "approver"
	}
	why := ""
	for i := range c.Grants {
		g := &c.Grants[i]
		if !(g.Tool != "" && g.Tool == c.Tool) && !(g.ActionClass != "" && g.ActionClass == c.ActionClass) {
			continue
		}
		switch {
		case g.Remaining <= 0:
			why = "grant " + g.ID + " is used up"
		case g.Ceiling != held && held == StateDeferred:
			why = "grant " + g.ID + " is the owner's: it does not stand in for an approver"
		case g.Ceiling != held:
			why = "grant " + g.ID + " is an approver's: it does not stand in for the owner's confirmation"
		case held == StateDeferred && g.Role != role:
			why = "grant " + g.ID + " is for packets of the " + g.Role + " role, and this call waits for the " + role + " role"
		default:
			if err := GrantBoundsHold(g.Bounds, c.GrantFacts); err != nil {
				why = "grant " + g.ID + " is bounded: " + err.Error()
				continue
			}
			return Verdict{LayerGrant, StateAllowed, grantReason(g, held)}, g
		}
	}
	if why == "" {
		what := "tool " + strconv.Quote(c.Tool)
		if c.ActionClass != "" {
			what += " or class " + strconv.Quote(c.ActionClass)
		}
		return no("No grant here covers " + what + ".")
	}
	return no("No grant covers the call: " + why + ".")
}

// grantReason names the grant, who granted it and what is left.
func grantReason(g *Grant, held State) string {
	instead := "the owner's confirmation"
	if held == StateDeferred {
		instead = "an approver"
	}
	return fmt.Sprintf("Grant %s by %s allows this call instead of waiting for %s: %d of its %d calls left after this one, until %s.",
		g.ID, g.GrantedBy, instead, g.Remaining-1, g.MaxCalls, g.ExpiresAt.UTC().Format(time.RFC3339))
}

// decideGrant runs the grant layer after the six others, when the call's
// scope has live grants, and loosens the decision when a grant covers
// the call.
func decideGrant(c Call, classes *ClassRegistry, d *Decision) {
	v, g := GrantLayer(c, classes, d.Layers, d.State)
	d.Layers = append(d.Layers, v)
	if g == nil {
		return
	}
	d.State = StateAllowed
	if slices.ContainsFunc(d.Layers, func(v Verdict) bool { return v.State == StateAllowedWithConstraints }) || len(g.Bounds) > 0 {
		d.State = StateAllowedWithConstraints
	}
	for _, b := range g.Bounds {
		d.Constraints = append(d.Constraints, b.Kind)
	}
	d.Disposition = DispositionGrant
	d.Grant = &GrantUse{ID: g.ID, GrantedBy: g.GrantedBy, Left: g.Remaining - 1, MaxCalls: g.MaxCalls, ExpiresAt: g.ExpiresAt}
}
