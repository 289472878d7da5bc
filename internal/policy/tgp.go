package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The Trust Graduation Protocol's wire shape (v0.1, §3 and §3.1): a
// decision is {"status", "action_class", "constraints"}, its constraints
// an object keyed by kind, a rate_limit {"count", "window"} with the
// window an ISO 8601 duration and expires_at an RFC 3339 time. Gatehouse's
// own decision (Decision) keeps its shape; TGPOf gives the protocol's view
// of it, and ParseTGPConstraints reads the protocol's constraints back.

// TGPDecision is a decision as the protocol writes it.
type TGPDecision struct {
	// Status is the decision state; the protocol's six states are
	// Gatehouse's, one for one.
	Status State `json:"status"`
	// ActionClass is the canonical class the call was decided as.
	ActionClass string `json:"action_class,omitempty"`
	// Constraints are keyed by kind ({} when none apply).
	Constraints TGPConstraints `json:"constraints"`
}

// TGPConstraints are constraints keyed by kind, each kind once.
type TGPConstraints struct {
	// Flags: internal_only, staging_only, dry_run_only, requires_witness;
	// and kinds whose bound the decision did not record, which are written
	// as true (see TGPOf).
	Flags []string
	// MaxAmount is the smallest max_amount (nil: none).
	MaxAmount *float64
	// RateLimits are every rate_limit, one per window (the smallest count
	// of each window), shortest window first: one is written as an object,
	// several as an array of them.
	RateLimits []TGPRateLimit
	// RecipientAllowlist and DomainAllowlist, when set, hold what every
	// allowlist of the kind allows at once (nil: none; empty: nothing is
	// allowed).
	RecipientAllowlist, DomainAllowlist []string
	// ExpiresAt is the earliest expires_at (nil: none).
	ExpiresAt *time.Time
	// RedactionRules are every field path any redaction_rules names.
	RedactionRules []string
}

// TGPRateLimit is a rate_limit: at most Count calls in any Window.
type TGPRateLimit struct {
	Count  int
	Window time.Duration
}

// MarshalJSON writes {"count": 5, "window": "PT1H"}.
func (r TGPRateLimit) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Count  int    `json:"count"`
		Window string `json:"window"`
	}{r.Count, FormatISODuration(r.Window)})
}

// MarshalJSON writes the constraints as one object keyed by kind.
func (t TGPConstraints) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	for _, k := range t.Flags {
		out[k] = true
	}
	if t.MaxAmount != nil {
		out[ConstraintMaxAmount] = *t.MaxAmount
	}
	switch len(t.RateLimits) {
	case 0:
	case 1:
		out[ConstraintRateLimit] = t.RateLimits[0]
	default:
		out[ConstraintRateLimit] = t.RateLimits
	}
	if t.RecipientAllowlist != nil {
		out[ConstraintRecipientAllowlist] = t.RecipientAllowlist
	}
	if t.DomainAllowlist != nil {
		out[ConstraintDomainAllowlist] = t.DomainAllowlist
	}
	if t.ExpiresAt != nil {
		out[ConstraintExpiresAt] = t.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	if t.RedactionRules != nil {
		out[ConstraintRedactionRules] = t.RedactionRules
	}
	return json.Marshal(out) // map keys are written sorted: a stable answer
}

// TGPOf is the protocol's view of d. Each kind d.Constraints names is
// written once, its bounds (d.Bounds) combined so that what the one value
// allows is exactly what all of them allow together: the smallest
// max_amount, the earliest expires_at, the allowlists' intersection,
// every redaction path, every rate_limit window (with two limits on one
// window, the smaller). A kind named with no bound (a decision whose
// bounds were not recorded) is written as true: it applies and is checked
// at execution, but its value is not part of this decision.
func TGPOf(d Decision) TGPDecision {
	out := TGPDecision{Status: d.State, ActionClass: d.ActionClass}
	kinds := slices.Clone(d.Constraints)
	slices.Sort(kinds)
	for _, kind := range slices.Compact(kinds) {
		var of []Constraint
		for _, b := range d.Bounds {
			if b.Kind == kind && b.Validate() == nil {
				of = append(of, b)
			}
		}
		out.Constraints.add(kind, of)
	}
	return out
}

// add writes one kind from its well-formed bounds.
func (t *TGPConstraints) add(kind string, of []Constraint) {
	switch kind {
	case ConstraintInternalOnly, ConstraintStagingOnly, ConstraintDryRunOnly, ConstraintRequiresWitness:
		t.Flags = append(t.Flags, kind)
		return
	}
	if len(of) == 0 {
		t.Flags = append(t.Flags, kind)
		return
	}
	switch kind {
	case ConstraintMaxAmount:
		m := of[0].Amount
		for _, c := range of[1:] {
			m = min(m, c.Amount)
		}
		t.MaxAmount = &m
	case ConstraintExpiresAt:
		at := of[0].At
		for _, c := range of[1:] {
			if c.At.Before(at) {
				at = c.At
			}
		}
		t.ExpiresAt = &at
	case ConstraintRateLimit:
		byWindow := map[time.Duration]int{}
		for _, c := range of {
			if n, ok := byWindow[c.Window]; !ok || c.Limit < n {
				byWindow[c.Window] = c.Limit
			}
		}
		for w, n := range byWindow {
			t.RateLimits = append(t.RateLimits, TGPRateLimit{Count: n, Window: w})
		}
		slices.SortFunc(t.RateLimits, func(a, b TGPRateLimit) int { return int(a.Window - b.Window) })
	case ConstraintDomainAllowlist:
		t.DomainAllowlist = intersectAll(of, intersectDomains)
	case ConstraintRecipientAllowlist:
		t.RecipientAllowlist = intersectAll(of, intersectRecipients)
	case ConstraintRedactionRules:
		var paths []string
		for _, c := range of {
			paths = append(paths, c.Values...)
		}
		slices.Sort(paths)
		t.RedactionRules = slices.Compact(paths)
	default:
		// An unknown kind was never valid (Validate refuses it), so it
		// has no bound: written as applying.
		t.Flags = append(t.Flags, kind)
	}
}

// intersectAll folds the allowlists of cs with intersect, normalised,
// sorted and without repeats; never nil.
func intersectAll(cs []Constraint, intersect func(a, b []string) []string) []string {
	acc := cs[0].Values
	for _, c := range cs[1:] {
		acc = intersect(acc, c.Values)
	}
	out := make([]string, 0, len(acc))
	for _, v := range acc {
		out = append(out, normEntry(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// normEntry is an allowlist entry as the checker reads it: an address
// lowercased, a domain without "@" or a trailing dot.
func normEntry(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	if isAddress(v) {
		return v
	}
	return normDomain(v)
}

// isAddress tells an address ("a@b.com") from a domain ("@b.com", "b.com")
// in an allowlist, as recipientsAllowed does.
func isAddress(v string) bool { return strings.Contains(strings.TrimPrefix(v, "@"), "@") }

// intersectDomains is a domain allowlist that allows exactly the hosts
// both a and b allow: a host is allowed by a domain when it is the domain
// or under it, so the hosts under both x and y are those under the deeper
// of the two when one is under the other, and none otherwise.
func intersectDomains(a, b []string) []string {
	var out []string
	for _, x := range a {
		if d := normDomain(x); d != "" && matchesAny(d, b) {
			out = append(out, d)
		}
	}
	for _, y := range b {
		if d := normDomain(y); d != "" && matchesAny(d, a) {
			out = append(out, d)
		}
	}
	return out
}

// intersectRecipients is a recipient allowlist that allows exactly the
// addresses both a and b allow: an address on one list allowed by the
// other, and the domains (matched exactly) on both.
func intersectRecipients(a, b []string) []string {
	var out []string
	for _, pair := range [][2][]string{{a, b}, {b, a}} {
		for _, x := range pair[0] {
			e := normEntry(x)
			switch {
			case e == "":
			case isAddress(e) && recipientsAllowed([]string{e}, pair[1]) == "":
				out = append(out, e)
			case !isAddress(e) && slices.ContainsFunc(pair[1], func(y string) bool { return !isAddress(normEntry(y)) && normEntry(y) == e }):
				out = append(out, e)
			}
		}
	}
	return out
}

// TGPFieldError says which field of a protocol body is wrong and why; the
// field is a dotted path from the body ("constraints.rate_limit.window").
type TGPFieldError struct {
	Field   string
	Message string
}

// Error says the field and the message.
func (e *TGPFieldError) Error() string { return "policy: " + e.Field + " " + e.Message }

// ParseTGPConstraints reads the protocol's constraints object (keyed by
// kind, as in the protocol's own example: {"domain_allowlist":
// ["company.com"], "rate_limit": {"count": 5, "window": "PT1H"},
// "expires_at": "2026-06-13T18:00:00Z"}) into constraints, in the order
// of ConstraintKinds. Flags take true (false leaves the kind out);
// rate_limit takes one {count, window} or an array of them. An unknown
// kind, an unknown field, a value of the wrong type or a malformed
// constraint is a *TGPFieldError naming it under field (the object's own
// path, e.g. "constraints").
func ParseTGPConstraints(field string, raw json.RawMessage) ([]Constraint, error) {
	bad := func(path, msg string) error { return &TGPFieldError{Field: path, Message: msg} }
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return nil, bad(field, "must be an object keyed by constraint kind")
	}
	for k := range in {
		if !slices.Contains(ConstraintKinds, k) {
			return nil, bad(field+"."+k, "is not a constraint kind (one of "+strings.Join(ConstraintKinds, ", ")+")")
		}
	}
	var out []Constraint
	for _, kind := range ConstraintKinds {
		v, ok := in[kind]
		if !ok {
			continue
		}
		path := field + "." + kind
		cs, err := parseTGPConstraint(path, kind, v)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if err := c.Validate(); err != nil {
				return nil, bad(path, strings.TrimPrefix(err.Error(), "policy: constraint "+kind+": "))
			}
		}
		out = append(out, cs...)
	}
	return out, nil
}

// parseTGPConstraint reads one kind's value.
func parseTGPConstraint(path, kind string, v json.RawMessage) ([]Constraint, error) {
	bad := func(p, msg string) error { return &TGPFieldError{Field: p, Message: msg} }
	switch kind {
	case ConstraintInternalOnly, ConstraintStagingOnly, ConstraintDryRunOnly, ConstraintRequiresWitness:
		var on bool
		if err := strictUnmarshal(v, &on); err != nil {
			return nil, bad(path, "must be true or false")
		}
		if !on {
			return nil, nil
		}
		return []Constraint{{Kind: kind}}, nil
	case ConstraintMaxAmount:
		var n float64
		if err := strictUnmarshal(v, &n); err != nil || !(n > 0) || math.IsInf(n, 0) {
			return nil, bad(path, "must be a number above 0")
		}
		return []Constraint{{Kind: kind, Amount: n}}, nil
	case ConstraintRecipientAllowlist, ConstraintDomainAllowlist, ConstraintRedactionRules:
		var vs []string
		if err := strictUnmarshal(v, &vs); err != nil || vs == nil {
			return nil, bad(path, "must be an array of strings")
		}
		return []Constraint{{Kind: kind, Values: vs}}, nil
	case ConstraintExpiresAt:
		var s string
		if err := strictUnmarshal(v, &s); err != nil {
			return nil, bad(path, "must be an RFC 3339 date-time string")
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, bad(path, "must be an RFC 3339 date-time such as 2026-06-13T18:00:00Z")
		}
		return []Constraint{{Kind: kind, At: at}}, nil
	case ConstraintRateLimit:
		if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '[' {
			var items []json.RawMessage
			if err := strictUnmarshal(v, &items); err != nil || len(items) == 0 {
				return nil, bad(path, "must be {count, window} or a non-empty array of them")
			}
			out := make([]Constraint, 0, len(items))
			for i, it := range items {
				c, err := parseRateLimit(fmt.Sprintf("%s.%d", path, i), it)
				if err != nil {
					return nil, err
				}
				out = append(out, c)
			}
			return out, nil
		}
		c, err := parseRateLimit(path, v)
		if err != nil {
			return nil, err
		}
		return []Constraint{c}, nil
	}
	return nil, bad(path, "is not a constraint kind")
}

// parseRateLimit reads {"count": 5, "window": "PT1H"}.
func parseRateLimit(path string, v json.RawMessage) (Constraint, error) {
	bad := func(p, msg string) error { return &TGPFieldError{Field: p, Message: msg} }
	var in map[string]json.RawMessage
	if err := json.Unmarshal(v, &in); err != nil || in == nil {
		return Constraint{}, bad(path, "must be an object {count, window}")
	}
	for k := range in {
		if k != "count" && k != "window" {
			return Constraint{}, bad(path+"."+k, "is not a field of rate_limit (count, window)")
		}
	}
	var count float64
	if err := strictUnmarshal(in["count"], &count); err != nil || count != math.Trunc(count) || count < 1 || count > math.MaxInt32 {
		return Constraint{}, bad(path+".count", "must be a whole number of calls, at least 1")
	}
	var window string
	if err := strictUnmarshal(in["window"], &window); err != nil {
		return Constraint{}, bad(path+".window", "must be an ISO 8601 duration such as PT1H")
	}
	d, err := ParseISODuration(window)
	if err != nil || d <= 0 {
		msg := "must be a duration above zero"
		if err != nil {
			msg = strings.TrimPrefix(err.Error(), "policy: ")
		}
		return Constraint{}, bad(path+".window", msg)
	}
	return Constraint{Kind: ConstraintRateLimit, Limit: int(count), Window: d}, nil
}

// strictUnmarshal decodes a present, non-null value into v.
func strictUnmarshal(raw json.RawMessage, v any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return fmt.Errorf("policy: missing")
	}
	return json.Unmarshal(raw, v)
}

// ParseTGPDecision reads a decision in the protocol's shape: a status the
// protocol knows, an action_class (canonicalised: legacy aliases resolve)
// and its constraints; other fields are left to the caller (the protocol
// lets implementations add fields). Errors are *TGPFieldError.
func ParseTGPDecision(raw json.RawMessage) (TGPDecision, []Constraint, error) {
	var in struct {
		Status      *string         `json:"status"`
		ActionClass *string         `json:"action_class"`
		Constraints json.RawMessage `json:"constraints"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return TGPDecision{}, nil, &TGPFieldError{Field: "body", Message: "must be a JSON object"}
	}
	var out TGPDecision
	if in.Status == nil || !slices.Contains(States, State(*in.Status)) {
		return TGPDecision{}, nil, &TGPFieldError{Field: "status", Message: "must be one of " + strings.Join(stateNames(), ", ")}
	}
	out.Status = State(*in.Status)
	if in.ActionClass != nil {
		class, err := CanonicalClass(*in.ActionClass)
		if err != nil {
			return TGPDecision{}, nil, &TGPFieldError{Field: "action_class", Message: "must be an action class in dot notation, such as email.send.internal"}
		}
		out.ActionClass = class
	}
	var cs []Constraint
	if len(in.Constraints) > 0 {
		var err error
		if cs, err = ParseTGPConstraints("constraints", in.Constraints); err != nil {
			return TGPDecision{}, nil, err
		}
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Kind
	}
	out = TGPOf(Decision{State: out.Status, ActionClass: out.ActionClass, Constraints: names, Bounds: cs})
	return out, cs, nil
}

func stateNames() []string {
	out := make([]string, len(States))
	for i, s := range States {
		out[i] = string(s)
	}
	return out
}
