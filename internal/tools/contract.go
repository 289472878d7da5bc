package tools

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/internal/policy"
)

// Contract is what a tool promises and what the gateway enforces for it,
// beyond its effect: how far its calls reach and how they are gated,
// deduplicated, rate limited, constrained and kept in the audit log.
type Contract struct {
	Authority policy.Authority
	// Risk defaults from the effect (read low, mutate medium, destructive high).
	Risk policy.Risk
	// ActionClass is the call's class in dot notation; Classify, when set,
	// computes it from the arguments instead (an email to an internal domain
	// is email.send.internal, otherwise email.send.external).
	ActionClass string
	Classify    func(args map[string]any, ws Workspace) string
	// ActionClasses lists what Classify can answer (shown to callers; each
	// is checked against the registry at start).
	ActionClasses []string
	Gating        Gating
	Idempotency   Idempotency
	RateLimits    RateLimits
	// Retention is how long the audit rows of its calls are kept; it
	// defaults from the authority class.
	Retention time.Duration
	// Constraints apply to every call, checked at execution;
	// WorkspaceConstraints adds those that come from the workspace's
	// settings (a webhook's domain allowlist).
	Constraints          []policy.Constraint
	WorkspaceConstraints func(ws Workspace) []policy.Constraint
	// Facts tells the constraint checker what a call reaches: recipients,
	// URLs, an amount.
	Facts func(args map[string]any) policy.Facts
	// Summarize is the one readable sentence an approver reads first
	// ("Send email to ana@example.com: Renewal reminder").
	Summarize func(args map[string]any) string

	// ClassRationale says in words why the tool has its authority class
	// (required: a class nobody explained is a class nobody checked).
	ClassRationale string
	// Reversibility says how an effect is undone; an irreversible tool's
	// opens with "None via tools". It defaults from the authority class.
	Reversibility string
	// PIIFields name the fields of its arguments (and, for a read, of its
	// result) that hold personal data: redacted in the audit export, and
	// named on a read's audit row as what was read (PIIRead).
	PIIFields []string
	// SLA is what callers may expect of its calls (optional).
	SLA SLA
}

// SLA is a tool's stated service level; a zero field states nothing.
type SLA struct {
	// P95Latency is the expected 95th percentile of a call's duration.
	P95Latency time.Duration
	// Availability is the share of calls expected to succeed, such as
	// "99.9%".
	Availability string
}

// Gating says when a call needs a person with a role (an approval packet).
type Gating struct {
	Required bool
	// Threshold gates only the calls above it, e.g. "amount > 10000" or
	// "count(keys) > 50".
	Threshold string
	// ApproverRole resolves the packet; Window is how long it stays open.
	ApproverRole string
	Window       time.Duration
	// Escalation and Quorum are the tool's own rules for its packets
	// (zero: the workspace's, from /admin/settings).
	Escalation Escalation
	Quorum     int
	// NotGatedReason is the stated reason an irreversible tool goes without
	// human gating.
	NotGatedReason string

	threshold *policy.Threshold
}

// Escalation sends a packet still pending After its opening to the
// holders of the role To as well (zero: never).
type Escalation struct {
	After time.Duration
	To    string
}

// Limits of the escalation and quorum rules.
const (
	MaxEscalateAfter = 7 * 24 * time.Hour
	MaxQuorum        = 10
)

// RoleName is what a role may be called: the workspace roles approver and
// admin, or a named approver role (migration 9's check).
var RoleName = regexp.MustCompile(`^[a-z][a-z0-9-]{1,62}$`)

// Idempotency says whether callers must send an Idempotency-Key and how
// long a key is remembered.
type Idempotency struct {
	Required bool
	// KeyFields are the arguments that make a call naturally idempotent
	// (records.put: collection and key), shown to callers.
	KeyFields []string
	Window    time.Duration
}

// RateLimits caps the calls of one tool; zero means no limit.
type RateLimits struct {
	PerAgentPerMinute   int
	PerWorkspacePerHour int
	PerWorkspacePerDay  int
}

// Workspace is what classification and constraints read of the workspace.
type Workspace struct {
	InternalDomains     []string
	WebhookAllowlist    []string
	AutoApproveHighRisk bool
	// ConfirmRunsHighRisk lets a caller's confirm: true stand in for the
	// approver of a high-risk call (the risk gate only; off by default).
	ConfirmRunsHighRisk bool
}

// Defaults by authority class.
var (
	retentionByAuthority = map[policy.Authority]time.Duration{
		policy.AuthorityRead:               30 * 24 * time.Hour,
		policy.AuthorityWriteIdempotent:    365 * 24 * time.Hour,
		policy.AuthorityWriteNonIdempotent: 7 * 365 * 24 * time.Hour,
		policy.AuthorityIrreversible:       10 * 365 * 24 * time.Hour,
	}
	// rateLimitsByAuthority are the classes' default limits (the four
	// authority classes: ~120 a minute per agent for reads, ~60 for
	// idempotent writes, ~10 for write-non-idempotent, ~1 and a daily cap
	// per workspace for irreversible). A tool that names limits of its own
	// (or whose policy-file entry does) has those instead. Reads' and
	// idempotent writes' are counted in memory and shared between
	// instances off the call path (internal/ratelimit).
	rateLimitsByAuthority = map[policy.Authority]RateLimits{
		policy.AuthorityRead:               {PerAgentPerMinute: 120},
		policy.AuthorityWriteIdempotent:    {PerAgentPerMinute: 60},
		policy.AuthorityWriteNonIdempotent: {PerAgentPerMinute: 10},
		policy.AuthorityIrreversible:       {PerAgentPerMinute: 1, PerWorkspacePerDay: 50},
	}
	authorityForEffect = map[policy.Effect][]policy.Authority{
		policy.EffectRead:        {policy.AuthorityRead},
		policy.EffectMutate:      {policy.AuthorityWriteIdempotent, policy.AuthorityWriteNonIdempotent},
		policy.EffectDestructive: {policy.AuthorityWriteNonIdempotent, policy.AuthorityIrreversible},
	}
)

const (
	defaultApprovalWindow = 24 * time.Hour
	defaultDedupWindow    = 24 * time.Hour
	irreversibleDedup     = 7 * 24 * time.Hour
)

// settle checks a declaration's contract and fills its defaults. Every
// refusal names the tool: a bad contract stops the server at start.
func (t *Tool) settle(classes *policy.ClassRegistry) error {
	c := &t.Contract
	fail := func(format string, args ...any) error {
		return fmt.Errorf("tools: %s: %s", t.Name, fmt.Sprintf(format, args...))
	}
	if !c.Authority.Valid() {
		return fail("authority class %q is not read, write-idempotent, write-non-idempotent or irreversible", c.Authority)
	}
	if !slices.Contains(authorityForEffect[t.Effect], c.Authority) {
		return fail("authority class %s does not fit effect %s", c.Authority, t.Effect)
	}
	if c.Risk == "" {
		c.Risk = policy.DefaultRisk(t.Effect)
	}
	if !c.Risk.Valid() {
		return fail("risk %q is not low, medium or high", c.Risk)
	}
	if c.Classify == nil {
		class, err := canonicalRegistered(classes, c.ActionClass)
		if err != nil {
			return fail("%v", err)
		}
		c.ActionClass = class
	} else {
		if c.ActionClass != "" || len(c.ActionClasses) == 0 {
			return fail("a computed action class lists its possible classes (ActionClasses) and no static one")
		}
		for i, a := range c.ActionClasses {
			class, err := canonicalRegistered(classes, a)
			if err != nil {
				return fail("%v", err)
			}
			c.ActionClasses[i] = class
		}
	}
	needsKey := c.Authority == policy.AuthorityWriteNonIdempotent || c.Authority == policy.AuthorityIrreversible
	if needsKey && !c.Idempotency.Required {
		return fail("a %s tool must require an idempotency key", c.Authority)
	}
	if c.Authority == policy.AuthorityIrreversible && !c.Gating.Required && c.Gating.Threshold == "" && c.Gating.NotGatedReason == "" {
		return fail("an irreversible tool needs human gating, or a stated reason (Gating.NotGatedReason) to go without")
	}
	if c.Gating.Threshold != "" {
		th, err := policy.ParseThreshold(c.Gating.Threshold)
		if err != nil {
			return fail("gating threshold: %v", err)
		}
		c.Gating.threshold = &th
	}
	if err := c.settleWords(); err != nil {
		return fail("%v", err)
	}
	if c.Gating.ApproverRole == "" {
		c.Gating.ApproverRole = "approver"
	}
	if c.Gating.Window == 0 {
		c.Gating.Window = defaultApprovalWindow
	}
	if c.Idempotency.Window == 0 {
		c.Idempotency.Window = defaultDedupWindow
		if c.Authority == policy.AuthorityIrreversible {
			c.Idempotency.Window = irreversibleDedup
		}
	}
	if c.Retention == 0 {
		c.Retention = retentionByAuthority[c.Authority]
	}
	if c.RateLimits == (RateLimits{}) {
		// The class's default (the four authority classes): a tool that
		// names no limit of its own gets its class's.
		c.RateLimits = rateLimitsByAuthority[c.Authority]
	}
	var errs []error
	for _, k := range c.Constraints {
		if err := k.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fail("constraints: %v", err)
	}
	return nil
}

// Class is the call's canonical action class, or "" when it cannot be
// classified (the class gate then blocks it).
func (t *Tool) Class(args map[string]any, ws Workspace, classes *policy.ClassRegistry) string {
	class := t.Contract.ActionClass
	if t.Contract.Classify != nil {
		class = t.Contract.Classify(args, ws)
	}
	canonical, err := policy.CanonicalClass(class)
	if err != nil {
		return ""
	}
	if _, ok := classes.Group(canonical); !ok {
		return ""
	}
	return canonical
}

// ThresholdExceeded reports whether the call is above the gating threshold;
// a threshold it cannot evaluate counts as exceeded (fail closed).
func (t *Tool) ThresholdExceeded(args map[string]any) bool {
	th := t.Contract.Gating.threshold
	if th == nil {
		return false
	}
	over, err := th.Exceeded(args)
	return over || err != nil
}

// ConstraintsFor is every constraint on a call in this workspace.
func (t *Tool) ConstraintsFor(ws Workspace) []policy.Constraint {
	out := append([]policy.Constraint{}, t.Contract.Constraints...)
	if t.Contract.WorkspaceConstraints != nil {
		out = append(out, t.Contract.WorkspaceConstraints(ws)...)
	}
	return out
}

func canonicalRegistered(classes *policy.ClassRegistry, class string) (string, error) {
	canonical, err := policy.CanonicalClass(class)
	if err != nil {
		return "", fmt.Errorf("action class %q: %w", class, err)
	}
	if _, ok := classes.Group(canonical); !ok {
		return "", fmt.Errorf("action class %s is not registered", canonical)
	}
	return canonical, nil
}

// Bounds of a contract's words.
const (
	minRationale = 10
	maxRationale = 1000
)

// NoneViaTools opens the reversibility of an irreversible tool.
const NoneViaTools = "None via tools"

// reversibilityByAuthority says how an effect is undone where a tool does
// not say it in its own words.
var reversibilityByAuthority = map[policy.Authority]string{
	policy.AuthorityRead:               "Nothing to undo: a read changes nothing.",
	policy.AuthorityWriteIdempotent:    "Another call with the earlier value overwrites it.",
	policy.AuthorityWriteNonIdempotent: "Not stated: each call adds an effect that only another action can offset.",
	policy.AuthorityIrreversible:       NoneViaTools + ".",
}

var (
	piiFieldName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	availability = regexp.MustCompile(`^(100|[0-9]{1,2}(\.[0-9]{1,4})?)%$`)
)

// settleWords checks the contract's class rationale, reversibility,
// personal-data fields and service level, and fills the reversibility's
// default.
func (c *Contract) settleWords() error {
	c.ClassRationale = strings.TrimSpace(c.ClassRationale)
	if n := utf8.RuneCountInString(c.ClassRationale); n < minRationale || n > maxRationale {
		return fmt.Errorf("a class rationale (ClassRationale: why it is %s, in %d to %d characters) is required", c.Authority, minRationale, maxRationale)
	}
	c.Reversibility = strings.TrimSpace(c.Reversibility)
	if c.Reversibility == "" {
		c.Reversibility = reversibilityByAuthority[c.Authority]
	}
	if utf8.RuneCountInString(c.Reversibility) > maxRationale {
		return fmt.Errorf("reversibility has more than %d characters", maxRationale)
	}
	if c.Authority == policy.AuthorityIrreversible && !strings.HasPrefix(strings.ToLower(c.Reversibility), strings.ToLower(NoneViaTools)) {
		return fmt.Errorf("an irreversible tool's reversibility opens with %q (got %q)", NoneViaTools, c.Reversibility)
	}
	for i, f := range c.PIIFields {
		if !piiFieldName.MatchString(f) {
			return fmt.Errorf("pii field %q is not a field name", f)
		}
		if slices.Contains(c.PIIFields[:i], f) {
			return fmt.Errorf("pii field %s is listed twice", f)
		}
	}
	if c.SLA.P95Latency < 0 || c.SLA.P95Latency > time.Hour {
		return fmt.Errorf("sla: p95 latency must be from 0 to 1h")
	}
	if c.SLA.Availability != "" && !availability.MatchString(c.SLA.Availability) {
		return fmt.Errorf("sla: availability must be a percentage such as 99.9%% (got %q)", c.SLA.Availability)
	}
	return nil
}
