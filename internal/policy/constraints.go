package policy

import (
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Constraint kinds.
const (
	ConstraintInternalOnly       = "internal_only"
	ConstraintStagingOnly        = "staging_only"
	ConstraintDryRunOnly         = "dry_run_only"
	ConstraintMaxAmount          = "max_amount"
	ConstraintRateLimit          = "rate_limit"
	ConstraintRecipientAllowlist = "recipient_allowlist"
	ConstraintDomainAllowlist    = "domain_allowlist"
	ConstraintExpiresAt          = "expires_at"
	ConstraintRequiresWitness    = "requires_witness"
	ConstraintRedactionRules     = "redaction_rules"
)

// ConstraintKinds lists every constraint kind.
var ConstraintKinds = []string{
	ConstraintInternalOnly, ConstraintStagingOnly, ConstraintDryRunOnly,
	ConstraintMaxAmount, ConstraintRateLimit, ConstraintRecipientAllowlist,
	ConstraintDomainAllowlist, ConstraintExpiresAt, ConstraintRequiresWitness,
	ConstraintRedactionRules,
}

// Redacted replaces every value Redact removes.
const Redacted = "[redacted]"

// Constraint is a machine-checked condition on a call, from its declaration
// or its approval, checked at execution. Which fields matter depends on
// Kind: Values for the allowlists and redaction_rules, Amount for
// max_amount, At for expires_at, Limit and Window for rate_limit.
type Constraint struct {
	Kind   string        `json:"kind"`
	Values []string      `json:"values,omitempty"`
	Amount float64       `json:"amount,omitempty"`
	At     time.Time     `json:"at,omitzero"`
	Limit  int           `json:"limit,omitempty"`
	Window time.Duration `json:"window,omitempty"`
}

// Validate reports whether c is well formed for its kind.
func (c Constraint) Validate() error {
	bad := func(why string) error { return fmt.Errorf("policy: constraint %s: %s", c.Kind, why) }
	switch c.Kind {
	case ConstraintInternalOnly, ConstraintStagingOnly, ConstraintDryRunOnly, ConstraintRequiresWitness:
		return nil
	case ConstraintMaxAmount:
		if !(c.Amount > 0) || math.IsInf(c.Amount, 0) {
			return bad("needs a finite amount above 0")
		}
	case ConstraintRateLimit:
		if c.Limit <= 0 || c.Window <= 0 {
			return bad("needs a limit and a window above 0")
		}
	case ConstraintRecipientAllowlist, ConstraintDomainAllowlist:
		if len(c.Values) == 0 || slices.ContainsFunc(c.Values, func(v string) bool { return strings.Trim(v, " @.") == "" }) {
			return bad("needs at least one value, none empty")
		}
	case ConstraintExpiresAt:
		if c.At.IsZero() {
			return bad("needs a time")
		}
	case ConstraintRedactionRules:
		if len(c.Values) == 0 {
			return bad("needs at least one field path")
		}
		for _, p := range c.Values {
			if !fieldPath.MatchString(p) {
				return bad(fmt.Sprintf("%q is not a field path", p))
			}
		}
	default:
		return fmt.Errorf("policy: unknown constraint kind %q", c.Kind)
	}
	return nil
}

// Environments a conversation or notebook may say its calls take effect
// in (its owner sets it; "" until they do). staging_only holds only in
// staging.
var Environments = []string{"production", "staging", "development", "test"}

// ValidEnvironment reports whether env is one of Environments ("" is not).
func ValidEnvironment(env string) bool { return slices.Contains(Environments, env) }

// StagingOnlyNeverHolds says why a staging_only constraint can never hold
// in a scope whose environment is env ("" when it can: env is staging).
func StagingOnlyNeverHolds(env string) string {
	switch env {
	case "staging":
		return ""
	case "":
		return "staging_only can never hold here: no environment is set for this conversation or notebook (its owner sets it in the page header)"
	}
	return fmt.Sprintf("staging_only can never hold here: this conversation or notebook is in %s (its owner sets its environment in the page header)", env)
}

// Facts is what the executor knows about a call when it checks constraints.
type Facts struct {
	Now             time.Time
	Environment     string   // "production", "staging", ...
	InternalDomains []string // the workspace's own domains
	Recipients      []string // email addresses the call sends to
	URLs            []string // URLs the call reaches
	Amount          *float64 // the call's amount, if it has one
	Approvers       []string // ids of the users who approved it
	// RecentCalls are the tool's calls in each rate_limit's window (by
	// the window), counted by the caller: each limit is compared with the
	// count of its own window.
	RecentCalls map[time.Duration]int
}

// Violation is a broken constraint.
type Violation struct {
	Constraint string
	Reason     string
}

// Error says which constraint broke and why.
func (v *Violation) Error() string { return "constraint " + v.Constraint + ": " + v.Reason }

// Check returns a *Violation for the first constraint in cs that f breaks,
// or nil when all hold. A malformed constraint is itself a violation, so a
// bad declaration fails closed. dry_run_only and redaction_rules never
// break: the executor honours them through DryRun and Redact.
func Check(cs []Constraint, f Facts) error {
	for _, c := range cs {
		if reason := check(c, f); reason != "" {
			return &Violation{Constraint: c.Kind, Reason: reason}
		}
	}
	return nil
}

// check is why f breaks c, or "" when c holds.
func check(c Constraint, f Facts) string {
	if err := c.Validate(); err != nil {
		return "the constraint is malformed: " + err.Error()
	}
	switch c.Kind {
	case ConstraintInternalOnly:
		return allDomainsMatch(f, f.InternalDomains, "is not internal")
	case ConstraintStagingOnly:
		if f.Environment != "staging" {
			return fmt.Sprintf("environment %q is not staging", f.Environment)
		}
	case ConstraintMaxAmount:
		if f.Amount != nil && !(*f.Amount <= c.Amount) {
			return fmt.Sprintf("amount %v is over %v", *f.Amount, c.Amount)
		}
	case ConstraintRateLimit:
		if n := f.RecentCalls[c.Window]; n >= c.Limit {
			return fmt.Sprintf("%d calls in the last %s reach the limit of %d", n, c.Window, c.Limit)
		}
	case ConstraintRecipientAllowlist:
		return recipientsAllowed(f.Recipients, c.Values)
	case ConstraintDomainAllowlist:
		return allDomainsMatch(f, c.Values, "is not on the allowlist")
	case ConstraintExpiresAt:
		if f.Now.IsZero() {
			return "the current time is not known"
		}
		if !f.Now.Before(c.At) {
			return "expired at " + c.At.UTC().Format(time.RFC3339)
		}
	case ConstraintRequiresWitness:
		if n := distinct(f.Approvers); n < 2 {
			return fmt.Sprintf("%d distinct approver(s), a witness needs 2", n)
		}
	}
	return ""
}

// allDomainsMatch checks every recipient's domain and every URL host
// against domains, equal or a subdomain.
func allDomainsMatch(f Facts, domains []string, notOK string) string {
	for _, r := range f.Recipients {
		_, domain, ok := parseAddress(r)
		if !ok {
			return fmt.Sprintf("%q is not an email address", r)
		}
		if !matchesAny(domain, domains) {
			return fmt.Sprintf("%s (domain %s) %s", r, domain, notOK)
		}
	}
	for _, u := range f.URLs {
		host, ok := urlHost(u)
		if !ok {
			return fmt.Sprintf("%q is not a URL with a host", u)
		}
		if !matchesAny(host, domains) {
			return fmt.Sprintf("%s (host %s) %s", u, host, notOK)
		}
	}
	return ""
}

// recipientsAllowed checks every recipient against an allowlist of
// addresses ("a@b.com") and domains ("@b.com" or "b.com", exact).
func recipientsAllowed(recipients, allow []string) string {
	for _, r := range recipients {
		addr, domain, ok := parseAddress(r)
		if !ok {
			return fmt.Sprintf("%q is not an email address", r)
		}
		allowed := slices.ContainsFunc(allow, func(a string) bool {
			a = strings.ToLower(strings.TrimSpace(a))
			if strings.Contains(strings.TrimPrefix(a, "@"), "@") {
				return a == addr
			}
			return normDomain(a) == domain
		})
		if !allowed {
			return addr + " is not on the allowlist"
		}
	}
	return ""
}

// parseAddress is the lowercased address and domain of an email address,
// bare or with a display name.
func parseAddress(s string) (addr, domain string, ok bool) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return "", "", false
	}
	addr = strings.ToLower(a.Address)
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return "", "", false
	}
	domain = normDomain(addr[i+1:])
	return addr, domain, domain != ""
}

// urlHost is the lowercased host of an absolute URL.
func urlHost(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", false
	}
	host := normDomain(u.Hostname())
	return host, host != ""
}

// normDomain lowercases a domain and drops a leading "@" and trailing ".".
func normDomain(d string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(d)), "@"), ".")
}

// matchesAny reports whether host is one of domains or a subdomain of one.
func matchesAny(host string, domains []string) bool {
	return slices.ContainsFunc(domains, func(d string) bool {
		d = normDomain(d)
		return d != "" && (host == d || strings.HasSuffix(host, "."+d))
	})
}

// distinct counts the distinct non-empty ids.
func distinct(ids []string) int {
	seen := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			seen[id] = true
		}
	}
	return len(seen)
}

// DryRun reports whether any constraint restricts the call to a dry run.
func DryRun(cs []Constraint) bool {
	return slices.ContainsFunc(cs, func(c Constraint) bool { return c.Kind == ConstraintDryRunOnly })
}

// Redact returns a deep copy of doc with every field path listed by a
// redaction_rules constraint replaced by Redacted. Paths that are missing,
// or that run through a value that is not an object, are ignored; doc is
// never changed.
func Redact(doc map[string]any, cs []Constraint) map[string]any {
	out, _ := deepCopy(doc).(map[string]any)
	for _, c := range cs {
		if c.Kind != ConstraintRedactionRules {
			continue
		}
		for _, p := range c.Values {
			redactPath(out, strings.Split(p, "."))
		}
	}
	return out
}

func redactPath(m map[string]any, keys []string) {
	for len(keys) > 1 {
		next, ok := m[keys[0]].(map[string]any)
		if !ok {
			return
		}
		m, keys = next, keys[1:]
	}
	if _, ok := m[keys[0]]; ok {
		m[keys[0]] = Redacted
	}
}

// deepCopy copies the objects and arrays of a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
