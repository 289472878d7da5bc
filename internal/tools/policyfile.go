package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/internal/policy"
)

// PolicyFile is gatehouse.yaml: the MCP upstream servers behind the gate,
// with per-tool overrides of how their calls are classified and
// cheatsheets. It is read at start, where a bad file stops the server with
// an error that names the line, and again on every reload
// (internal/policyfile), where a bad file keeps the last good one.
type PolicyFile struct {
	Upstreams []UpstreamConfig
	// Tools overrides, per built-in tool name, its contract (the same keys
	// as an upstream tool's override, with threshold and constraints):
	// ApplyOverrides applies them to the registry.
	Tools map[string]UpstreamOverride
	// CallerTools are the tools the caller runs itself (caller_tools):
	// proposed and decided like any tool, run by the caller with an
	// execution ticket (DeclareCallerTools declares them).
	CallerTools []CallerToolConfig
	// CallerDeclarations says whether a caller may declare its own tool
	// with a call (caller_declarations: allow, the default, or refuse).
	CallerDeclarations string
	// Settings are the workspace settings the file sets (settings:), and
	// which of them it pins.
	Settings FileSettings
}

// UpstreamConfig is one upstream MCP server.
type UpstreamConfig struct {
	// Name prefixes its tools in the registry: <name>.<tool>.
	Name string
	// Exactly one of URL (Streamable HTTP) and Command (stdio).
	URL     string
	Command []string
	// Headers go with every HTTP request to the upstream. They are held
	// server-side: never logged, never shown (see HeaderNames).
	Headers map[string]string
	// Timeout bounds each call forwarded to it (30 s by default).
	Timeout time.Duration
	// Accept lists the upstream's tools accepted without an admin's review
	// when they are first seen; a later change of definition holds them
	// all the same.
	Accept []string
	// Tools overrides, per upstream tool name, what its annotations say.
	Tools map[string]UpstreamOverride
	// Cheatsheet is the markdown cheatsheet of every tool of this upstream
	// that has none of its own.
	Cheatsheet string
	// Line is where the upstream is declared in the file.
	Line int
}

// HeaderNames lists the header names sent to the upstream, never their
// values.
func (u UpstreamConfig) HeaderNames() []string {
	names := make([]string, 0, len(u.Headers))
	for k := range u.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Endpoint says where the upstream is, without secrets: its URL without
// credentials or query, or its command's program.
func (u UpstreamConfig) Endpoint() string {
	if u.URL != "" {
		p, err := url.Parse(u.URL)
		if err != nil {
			return "(invalid URL)"
		}
		p.User, p.RawQuery, p.Fragment = nil, "", ""
		return p.String()
	}
	if len(u.Command) > 0 {
		return u.Command[0]
	}
	return ""
}

// String never shows the headers' values.
func (u UpstreamConfig) String() string {
	return fmt.Sprintf("upstream %s (%s)", u.Name, u.Endpoint())
}

// UpstreamOverride is what the policy file says of one upstream tool. A
// zero field says nothing: the tool's annotations decide it (worst case
// where they are missing).
type UpstreamOverride struct {
	Effect       policy.Effect
	Authority    policy.Authority
	ActionClass  string
	Risk         policy.Risk
	HumanGated   *bool
	ApproverRole string
	// Threshold gates only the calls above it ("amount > 10000"), and
	// Constraints add runtime constraints in the constraint vocabulary
	// (an irreversible tool's destination allowlist, say); built-in tools
	// (PolicyFile.Tools) only.
	Threshold   string
	Constraints []policy.Constraint
	// Escalation and Quorum of its approval packets (zero: the
	// workspace's rules).
	Escalation Escalation
	Quorum     int
	RateLimits RateLimits
	Cheatsheet string
	// ClassRationale is the file's reason for how it classes the tool
	// (shown as "The policy file says: …"); Reversibility, PIIFields and
	// SLA are its contract's (see Contract).
	ClassRationale string
	Reversibility  string
	PIIFields      []string
	SLA            SLA
	// Mode is ModeShadow for a rule that is not enforced: the tool keeps
	// its declaration without this override, and every live call of it is
	// also decided under the override, what that would have decided
	// recorded when it differs ("" or "enforce": enforced).
	Mode string
	Line int
}

// Modes of an override.
const (
	ModeEnforce = "enforce"
	ModeShadow  = "shadow"
)

// Shadow reports whether the override is a shadow rule.
func (o UpstreamOverride) Shadow() bool { return o.Mode == ModeShadow }

// DefaultUpstreamTimeout bounds a forwarded call whose upstream names no
// timeout.
const DefaultUpstreamTimeout = 30 * time.Second

var (
	upstreamName   = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	headerName     = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	upstreamTool   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
	envPlaceholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// LoadPolicyFile reads and checks the policy file at path. ${NAME} in a
// header's value is replaced by the environment variable NAME (getenv),
// so secrets need not live in the file; an unset one is an error.
func LoadPolicyFile(path string, classes *policy.ClassRegistry, getenv func(string) string) (*PolicyFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	f, err := ParsePolicyFile(data, classes, getenv)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return f, nil
}

// ParsePolicyFile parses and checks a policy file; every error names its
// line.
func ParsePolicyFile(data []byte, classes *policy.ClassRegistry, getenv func(string) string) (*PolicyFile, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &PolicyFile{}, nil // an empty file declares nothing
		}
		return nil, err
	}
	f := &PolicyFile{}
	if len(doc.Content) == 0 {
		return f, nil
	}
	root := doc.Content[0]
	if err := checkKeys(root, "upstreams", "tools", "caller_tools", "caller_declarations", "settings"); err != nil {
		return nil, err
	}
	if sn := valueOf(root, "settings"); sn != nil {
		fs, err := parseSettings(sn)
		if err != nil {
			return nil, err
		}
		f.Settings = fs
	}
	if tl := valueOf(root, "tools"); tl != nil {
		if tl.Kind != yaml.MappingNode {
			return nil, lineError(tl, "tools must be a mapping of built-in tool names to their overrides")
		}
		f.Tools = map[string]UpstreamOverride{}
		for i := 0; i+1 < len(tl.Content); i += 2 {
			name := tl.Content[i].Value
			o, err := parseOverride(tl.Content[i+1], name, classes)
			if err != nil {
				return nil, err
			}
			o.Line = tl.Content[i].Line
			f.Tools[name] = o
		}
	}
	if cl := valueOf(root, "caller_tools"); cl != nil {
		callers, err := parseCallerTools(cl, classes)
		if err != nil {
			return nil, err
		}
		for _, c := range callers {
			if c.Contract.Shadow() {
				return nil, fmt.Errorf("line %d: caller_tools: %s: mode: shadow is for overrides of built-in and upstream tools; a caller tool is declared, not overridden", c.Line, c.Name)
			}
		}
		f.CallerTools = callers
	}
	if cd := valueOf(root, "caller_declarations"); cd != nil {
		v, err := parseCallerDeclarations(cd)
		if err != nil {
			return nil, err
		}
		f.CallerDeclarations = v
	}
	list := valueOf(root, "upstreams")
	if list == nil {
		return f, checkCallerNames(f)
	}
	if list.Kind != yaml.SequenceNode {
		return nil, lineError(list, "upstreams must be a list")
	}
	seen := map[string]int{}
	for _, n := range list.Content {
		u, err := parseUpstream(n, classes, getenv)
		if err != nil {
			return nil, err
		}
		if line, dup := seen[u.Name]; dup {
			return nil, lineError(n, "upstream %q is declared twice (first on line %d)", u.Name, line)
		}
		seen[u.Name] = u.Line
		f.Upstreams = append(f.Upstreams, u)
	}
	return f, checkCallerNames(f)
}

func lineError(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", n.Line, fmt.Sprintf(format, args...))
}

// checkKeys refuses a mapping key that is not one of allowed (a typo
// would silently say nothing).
func checkKeys(n *yaml.Node, allowed ...string) error {
	if n.Kind != yaml.MappingNode {
		return lineError(n, "expected a mapping with %s", strings.Join(allowed, ", "))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if !slices.Contains(allowed, k) {
			return lineError(n.Content[i], "unknown key %q (expected one of %s)", k, strings.Join(allowed, ", "))
		}
		if seen[k] {
			return lineError(n.Content[i], "key %q appears twice", k)
		}
		seen[k] = true
	}
	return nil
}

// valueOf is the value of a mapping's key, nil when absent.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func decodeAs[T any](n *yaml.Node, what string) (T, error) {
	var v T
	if err := n.Decode(&v); err != nil {
		return v, lineError(n, "%s: %s", what, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return v, nil
}

func parseUpstream(n *yaml.Node, classes *policy.ClassRegistry, getenv func(string) string) (UpstreamConfig, error) {
	u := UpstreamConfig{Line: n.Line, Timeout: DefaultUpstreamTimeout}
	if err := checkKeys(n, "name", "url", "command", "headers", "timeout", "accept", "tools", "cheatsheet"); err != nil {
		return u, err
	}
	var err error
	if v := valueOf(n, "name"); v != nil {
		if u.Name, err = decodeAs[string](v, "name"); err != nil {
			return u, err
		}
	}
	if !upstreamName.MatchString(u.Name) || len(u.Name) > 40 {
		return u, lineError(n, "an upstream needs a name of at most 40 characters matching [a-z][a-z0-9_-]* (got %q)", u.Name)
	}
	at := func(key string) *yaml.Node { return valueOf(n, key) }
	if v := at("url"); v != nil {
		if u.URL, err = decodeAs[string](v, "url"); err != nil {
			return u, err
		}
		p, perr := url.Parse(u.URL)
		if perr != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return u, lineError(v, "upstream %s: url must be an http or https URL", u.Name)
		}
	}
	if v := at("command"); v != nil {
		if u.Command, err = decodeAs[[]string](v, "command"); err != nil {
			return u, err
		}
		if len(u.Command) == 0 || strings.TrimSpace(u.Command[0]) == "" {
			return u, lineError(v, "upstream %s: command must name a program: [\"program\", \"--flag\"]", u.Name)
		}
	}
	if (u.URL == "") == (len(u.Command) == 0) {
		return u, lineError(n, "upstream %s needs exactly one of url (Streamable HTTP) and command (stdio)", u.Name)
	}
	if v := at("headers"); v != nil {
		if u.URL == "" {
			return u, lineError(v, "upstream %s: headers go with url only", u.Name)
		}
		if u.Headers, err = decodeAs[map[string]string](v, "headers"); err != nil {
			return u, err
		}
		for k, val := range u.Headers {
			if !headerName.MatchString(k) {
				return u, lineError(v, "upstream %s: %q is not a header name", u.Name, k)
			}
			var missing string
			val = envPlaceholder.ReplaceAllStringFunc(val, func(m string) string {
				name := envPlaceholder.FindStringSubmatch(m)[1]
				got := getenv(name)
				if got == "" {
					missing = name
				}
				return got
			})
			if missing != "" {
				return u, lineError(v, "upstream %s: header %s uses ${%s}, which is not set", u.Name, k, missing)
			}
			if strings.ContainsAny(val, "\r\n\x00") {
				return u, lineError(v, "upstream %s: header %s holds a line break", u.Name, k)
			}
			u.Headers[k] = val
		}
	}
	if v := at("timeout"); v != nil {
		s, err := decodeAs[string](v, "timeout")
		if err != nil {
			return u, err
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 100*time.Millisecond || d > 10*time.Minute {
			return u, lineError(v, "upstream %s: timeout must be a duration from 100ms to 10m, such as 30s", u.Name)
		}
		u.Timeout = d
	}
	if v := at("accept"); v != nil {
		if u.Accept, err = decodeAs[[]string](v, "accept"); err != nil {
			return u, err
		}
		for _, name := range u.Accept {
			if !upstreamTool.MatchString(name) {
				return u, lineError(v, "upstream %s: %q is not a tool name", u.Name, name)
			}
		}
	}
	if v := at("cheatsheet"); v != nil {
		if u.Cheatsheet, err = decodeAs[string](v, "cheatsheet"); err != nil {
			return u, err
		}
		if len(u.Cheatsheet) > maxCheatsheet {
			return u, lineError(v, "upstream %s: the cheatsheet has more than %d bytes", u.Name, maxCheatsheet)
		}
	}
	if v := at("tools"); v != nil {
		if v.Kind != yaml.MappingNode {
			return u, lineError(v, "upstream %s: tools must map each tool's name to its overrides", u.Name)
		}
		u.Tools = map[string]UpstreamOverride{}
		for i := 0; i+1 < len(v.Content); i += 2 {
			name := v.Content[i].Value
			if !upstreamTool.MatchString(name) {
				return u, lineError(v.Content[i], "upstream %s: %q is not a tool name", u.Name, name)
			}
			if _, dup := u.Tools[name]; dup {
				return u, lineError(v.Content[i], "upstream %s: tool %s appears twice", u.Name, name)
			}
			o, err := parseOverride(v.Content[i+1], u.Name+"."+name, classes)
			if err != nil {
				return u, err
			}
			if len(o.Constraints) > 0 {
				// Gatehouse reads a built-in tool's facts (its recipients,
				// hosts, amount) from its arguments; an upstream tool's
				// arguments say nothing it could check a constraint against.
				return u, lineError(valueOf(v.Content[i+1], "constraints"), "upstream %s: tool %s: constraints apply to built-in tools only", u.Name, name)
			}
			u.Tools[name] = o
		}
	}
	return u, nil
}

// maxCheatsheet bounds a cheatsheet (64 KiB).
const maxCheatsheet = 64 << 10

func parseOverride(n *yaml.Node, tool string, classes *policy.ClassRegistry) (UpstreamOverride, error) {
	o := UpstreamOverride{Line: n.Line}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return o, nil
	}
	if err := checkKeys(n, "effect", "authority", "action_class", "risk", "human_gated", "approver_role", "escalate_after", "escalate_to", "quorum", "rate_limits", "cheatsheet",
		"class_rationale", "reversibility", "pii_fields", "sla", "threshold", "constraints", "mode"); err != nil {
		return o, err
	}
	str := func(key string) (string, *yaml.Node, error) {
		v := valueOf(n, key)
		if v == nil {
			return "", nil, nil
		}
		s, err := decodeAs[string](v, key)
		return s, v, err
	}
	s, v, err := str("effect")
	if err != nil {
		return o, err
	}
	if o.Effect = policy.Effect(s); s != "" && !slices.Contains([]policy.Effect{policy.EffectRead, policy.EffectMutate, policy.EffectDestructive}, o.Effect) {
		return o, lineError(v, "%s: effect must be read, mutate or destructive", tool)
	}
	if s, v, err = str("authority"); err != nil {
		return o, err
	}
	if o.Authority = policy.Authority(s); s != "" && !o.Authority.Valid() {
		return o, lineError(v, "%s: authority must be read, write-idempotent, write-non-idempotent or irreversible", tool)
	}
	if o.Effect != "" && o.Authority != "" && !slices.Contains(authorityForEffect[o.Effect], o.Authority) {
		return o, lineError(n, "%s: authority %s does not fit effect %s", tool, o.Authority, o.Effect)
	}
	if s, v, err = str("action_class"); err != nil {
		return o, err
	}
	if s != "" {
		class, err := canonicalRegistered(classes, s)
		if err != nil {
			return o, lineError(v, "%s: %v", tool, err)
		}
		o.ActionClass = class
	}
	if s, v, err = str("risk"); err != nil {
		return o, err
	}
	if o.Risk = policy.Risk(s); s != "" && !o.Risk.Valid() {
		return o, lineError(v, "%s: risk must be low, medium or high", tool)
	}
	if v := valueOf(n, "human_gated"); v != nil {
		b, err := decodeAs[bool](v, "human_gated")
		if err != nil {
			return o, err
		}
		o.HumanGated = &b
	}
	if o.ApproverRole, v, err = str("approver_role"); err != nil {
		return o, err
	}
	if o.ApproverRole != "" && !RoleName.MatchString(o.ApproverRole) {
		return o, lineError(v, "%s: approver_role %q is not a role name (lower case letters, digits and dashes)", tool, o.ApproverRole)
	}
	if s, v, err = str("escalate_after"); err != nil {
		return o, err
	}
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute || d > MaxEscalateAfter || d%time.Minute != 0 {
			return o, lineError(v, "%s: escalate_after must be whole minutes from 1m to %s, like 30m or 2h", tool, MaxEscalateAfter)
		}
		o.Escalation.After = d
	}
	if o.Escalation.To, v, err = str("escalate_to"); err != nil {
		return o, err
	}
	if o.Escalation.To != "" && !RoleName.MatchString(o.Escalation.To) {
		return o, lineError(v, "%s: escalate_to %q is not a role name (lower case letters, digits and dashes)", tool, o.Escalation.To)
	}
	if (o.Escalation.After == 0) != (o.Escalation.To == "") {
		return o, lineError(n, "%s: escalate_after and escalate_to go together", tool)
	}
	if v := valueOf(n, "quorum"); v != nil {
		k, err := decodeAs[int](v, "quorum")
		if err != nil {
			return o, err
		}
		if k < 1 || k > MaxQuorum {
			return o, lineError(v, "%s: quorum must be 1 to %d distinct approvers", tool, MaxQuorum)
		}
		o.Quorum = k
	}
	if v := valueOf(n, "rate_limits"); v != nil {
		if err := checkKeys(v, "per_agent_per_minute", "per_workspace_per_hour", "per_workspace_per_day"); err != nil {
			return o, err
		}
		limits, err := decodeAs[map[string]int](v, "rate_limits")
		if err != nil {
			return o, err
		}
		for k, l := range limits {
			if l < 0 {
				return o, lineError(v, "%s: %s must not be negative", tool, k)
			}
		}
		o.RateLimits = RateLimits{PerAgentPerMinute: limits["per_agent_per_minute"], PerWorkspacePerHour: limits["per_workspace_per_hour"], PerWorkspacePerDay: limits["per_workspace_per_day"]}
	}
	if s, v, err = str("cheatsheet"); err != nil {
		return o, err
	}
	if len(s) > maxCheatsheet {
		return o, lineError(v, "%s: the cheatsheet has more than %d bytes", tool, maxCheatsheet)
	}
	o.Cheatsheet = s
	if err := parseContractWords(n, tool, &o); err != nil {
		return o, err
	}
	if s, v, err = str("threshold"); err != nil {
		return o, err
	}
	if s != "" {
		if _, err := policy.ParseThreshold(s); err != nil {
			return o, lineError(v, "%s: threshold: %v", tool, err)
		}
		o.Threshold = s
	}
	if v := valueOf(n, "constraints"); v != nil {
		if o.Constraints, err = parseConstraints(v, tool); err != nil {
			return o, err
		}
	}
	if s, v, err = str("mode"); err != nil {
		return o, err
	}
	switch s {
	case "", ModeEnforce:
	case ModeShadow:
		o.Mode = ModeShadow
	default:
		return o, lineError(v, "%s: mode must be enforce (the default) or shadow (evaluated on live calls and recorded, not enforced)", tool)
	}
	return o, nil
}

// parseConstraints reads a tool's runtime constraints, in the constraint
// vocabulary (docs/policy.md): each a mapping with kind and its bound
// (values, amount, at as RFC 3339, limit and window as a duration).
func parseConstraints(v *yaml.Node, tool string) ([]policy.Constraint, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, lineError(v, "%s: constraints must be a list", tool)
	}
	out := make([]policy.Constraint, 0, len(v.Content))
	for _, item := range v.Content {
		if err := checkKeys(item, "kind", "values", "amount", "at", "limit", "window"); err != nil {
			return nil, err
		}
		raw, err := decodeAs[struct {
			Kind   string   `yaml:"kind"`
			Values []string `yaml:"values"`
			Amount float64  `yaml:"amount"`
			At     string   `yaml:"at"`
			Limit  int      `yaml:"limit"`
			Window string   `yaml:"window"`
		}](item, "constraints")
		if err != nil {
			return nil, err
		}
		c := policy.Constraint{Kind: raw.Kind, Values: raw.Values, Amount: raw.Amount, Limit: raw.Limit}
		if raw.At != "" {
			if c.At, err = time.Parse(time.RFC3339, raw.At); err != nil {
				return nil, lineError(item, "%s: constraint %s: at must be an RFC 3339 time", tool, raw.Kind)
			}
		}
		if raw.Window != "" {
			if c.Window, err = time.ParseDuration(raw.Window); err != nil {
				return nil, lineError(item, "%s: constraint %s: window must be a duration such as 1h", tool, raw.Kind)
			}
		}
		if err := c.Validate(); err != nil {
			return nil, lineError(item, "%s: %v", tool, strings.TrimPrefix(err.Error(), "policy: "))
		}
		out = append(out, c)
	}
	return out, nil
}

// parseContractWords reads an upstream tool's class_rationale,
// reversibility, pii_fields and sla.
func parseContractWords(n *yaml.Node, tool string, o *UpstreamOverride) error {
	for _, k := range []struct {
		key string
		to  *string
		min int
	}{{"class_rationale", &o.ClassRationale, minRationale}, {"reversibility", &o.Reversibility, 1}} {
		v := valueOf(n, k.key)
		if v == nil {
			continue
		}
		s, err := decodeAs[string](v, k.key)
		if err != nil {
			return err
		}
		s = strings.TrimSpace(s)
		if l := utf8.RuneCountInString(s); l < k.min || l > maxFileRationale {
			return lineError(v, "%s: %s must be %d to %d characters", tool, k.key, k.min, maxFileRationale)
		}
		*k.to = s
	}
	if v := valueOf(n, "pii_fields"); v != nil {
		fields, err := decodeAs[[]string](v, "pii_fields")
		if err != nil {
			return err
		}
		for i, f := range fields {
			if !piiFieldName.MatchString(f) {
				return lineError(v, "%s: pii_fields: %q is not a field name", tool, f)
			}
			if slices.Contains(fields[:i], f) {
				return lineError(v, "%s: pii_fields: %s is listed twice", tool, f)
			}
		}
		o.PIIFields = fields
	}
	if v := valueOf(n, "sla"); v != nil {
		if err := checkKeys(v, "p95_latency_ms", "availability"); err != nil {
			return err
		}
		if l := valueOf(v, "p95_latency_ms"); l != nil {
			ms, err := decodeAs[int](l, "p95_latency_ms")
			if err != nil {
				return err
			}
			if ms < 1 || ms > int(time.Hour/time.Millisecond) {
				return lineError(l, "%s: sla: p95_latency_ms must be from 1 to 3600000", tool)
			}
			o.SLA.P95Latency = time.Duration(ms) * time.Millisecond
		}
		if a := valueOf(v, "availability"); a != nil {
			s, err := decodeAs[string](a, "availability")
			if err != nil {
				return err
			}
			if !availability.MatchString(s) {
				return lineError(a, "%s: sla: availability must be a percentage such as \"99.9%%\"", tool)
			}
			o.SLA.Availability = s
		}
	}
	return nil
}

// maxFileRationale bounds the policy file's class_rationale and
// reversibility (the reason rule: 10 to 500 characters).
const maxFileRationale = 500
