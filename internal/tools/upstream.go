package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/canonjson"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// The tools of an MCP upstream server, declared in the registry as
// <upstream>.<tool> when Gatehouse lists them. How a call is classified
// comes from the tool's annotations, read as the worst case where a hint
// is missing, then from the policy file's override; annotations are the
// upstream's word, untrusted, so they may make a tool stricter than the
// file says, never looser.

// Action classes of upstream calls that change something, by whether
// they reach beyond the upstream (openWorldHint). tool.call.external is
// not canonical: Builtin registers it, in the external group.
const (
	ClassToolCallLocal    = "tool.call.local"
	ClassToolCallExternal = "tool.call.external"
	// ClassReadContext is the class of upstream reads.
	ClassReadContext = "read.context"
)

// Annotations are an upstream tool's hints, as it declares them; nil is
// a hint it does not give.
type Annotations struct {
	Title       string `json:"title,omitempty"`
	ReadOnly    *bool  `json:"readOnlyHint,omitempty"`
	Destructive *bool  `json:"destructiveHint,omitempty"`
	Idempotent  *bool  `json:"idempotentHint,omitempty"`
	OpenWorld   *bool  `json:"openWorldHint,omitempty"`
}

// UpstreamTool is one tool as an upstream lists it.
type UpstreamTool struct {
	Upstream    string
	Name        string
	Title       string
	Description string
	InputSchema json.RawMessage
	// OutputSchema is the JSON Schema of the result's structuredContent,
	// when the upstream declares one (nil when it does not).
	OutputSchema json.RawMessage
	Annotations  Annotations
}

// DeclaredName is the tool's name in the registry: <upstream>.<tool>.
func (u UpstreamTool) DeclaredName() string { return u.Upstream + "." + u.Name }

// upstreamDefinition is the pinned form of an upstream tool. Fields added
// after pins were first kept are omitted when empty, so a tool that does
// not use them hashes as it always did and no pin moves on an upgrade.
type upstreamDefinition struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  Annotations     `json:"annotations"`
}

// Definition is what is pinned of an upstream tool: its name, description,
// input schema, output schema (when it has one) and annotations, as
// canonical JSON (RFC 8785).
func (u UpstreamTool) Definition() (json.RawMessage, error) {
	output := u.OutputSchema
	if string(output) == "null" {
		output = nil
	}
	b, err := json.Marshal(upstreamDefinition{u.Name, u.Title, u.Description, u.InputSchema, output, u.Annotations})
	if err != nil {
		return nil, fmt.Errorf("tools: encode %s: %w", u.DeclaredName(), err)
	}
	out, err := canonjson.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("tools: canonical %s: %w", u.DeclaredName(), err)
	}
	return out, nil
}

// DefinitionHash is the SHA-256 (hex) of Definition: a pin. Any change of
// name, description, input schema, output schema or annotations changes
// it; a tool without an output schema hashes as before output schemas
// were pinned.
func (u UpstreamTool) DefinitionHash() (string, error) {
	def, err := u.Definition()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:]), nil
}

// UpstreamToolFromDefinition reads a pinned definition (Definition's JSON,
// as the database keeps it) back into the tool it describes. Its hash is
// checked against hash, so what is read back is exactly what was pinned.
func UpstreamToolFromDefinition(upstream, hash string, def json.RawMessage) (UpstreamTool, error) {
	var d upstreamDefinition
	if err := json.Unmarshal(def, &d); err != nil {
		return UpstreamTool{}, fmt.Errorf("tools: read the pinned definition of %s: %w", upstream, err)
	}
	u := UpstreamTool{Upstream: upstream, Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema,
		OutputSchema: d.OutputSchema, Annotations: d.Annotations}
	got, err := u.DefinitionHash()
	if err != nil {
		return UpstreamTool{}, err
	}
	if got != hash {
		return UpstreamTool{}, fmt.Errorf("tools: the pinned definition of %s does not hash to its pin", u.DeclaredName())
	}
	return u, nil
}

// UpstreamClass is how an upstream tool's calls are decided: the effect
// and contract it is declared with.
type UpstreamClass struct {
	Effect       policy.Effect
	Authority    policy.Authority
	ActionClass  string
	Risk         policy.Risk
	HumanGated   bool
	ApproverRole string
	Escalation   Escalation
	Quorum       int
	RateLimits   RateLimits
	// OpenWorld: the tool may reach beyond the upstream.
	OpenWorld bool
	// NotGatedReason is set when the file declines gating for an
	// irreversible tool.
	NotGatedReason string
}

func hint(b *bool, missing bool) bool {
	if b == nil {
		return missing
	}
	return *b
}

var effectRank = map[policy.Effect]int{policy.EffectRead: 0, policy.EffectMutate: 1, policy.EffectDestructive: 2}

var authorityRank = map[policy.Authority]int{policy.AuthorityRead: 0, policy.AuthorityWriteIdempotent: 1, policy.AuthorityWriteNonIdempotent: 2, policy.AuthorityIrreversible: 3}

var riskRank = map[policy.Risk]int{policy.RiskLow: 0, policy.RiskMedium: 1, policy.RiskHigh: 2}

// ClassifyUpstream decides how an upstream tool's calls are classified:
// the stricter of what the policy file says and what the annotations
// imply.
//
// Where the file is silent, the annotations decide, read as the worst case
// where a hint is missing: not read-only → a change; destructiveHint
// missing → destructive; idempotentHint missing → not idempotent;
// openWorldHint missing → open world. A destructive tool is irreversible
// and human-gated unless the file says otherwise.
//
// Where the file speaks, every hint the upstream gives (a missing hint is
// no claim) can still make the tool stricter, never looser:
//   - readOnlyHint: false → at least a change (the file's read becomes
//     mutate, and its read.context a change's class);
//   - destructiveHint: true → destructive and irreversible, even beside
//     readOnlyHint: true: contradictory hints count as the more dangerous;
//   - idempotentHint: false on a tool that is not read-only → not
//     idempotent (the file's write-idempotent becomes write-non-idempotent,
//     so an idempotency key is required);
//   - openWorldHint: true on a change → tool.call.external where the file
//     names tool.call.local.
//
// A hint that claims safety (readOnlyHint: true, destructiveHint: false,
// idempotentHint: true, openWorldHint: false) never loosens the file.
func ClassifyUpstream(a Annotations, o UpstreamOverride) UpstreamClass {
	readOnly := hint(a.ReadOnly, false)
	destructive := hint(a.Destructive, true)
	idempotent := hint(a.Idempotent, false)
	open := hint(a.OpenWorld, true)
	// What the upstream claims of danger, explicitly.
	saysWrites := a.ReadOnly != nil && !*a.ReadOnly
	saysDestroys := a.Destructive != nil && *a.Destructive
	saysNotIdempotent := a.Idempotent != nil && !*a.Idempotent && !readOnly
	saysOpen := a.OpenWorld != nil && *a.OpenWorld

	// The effect: the annotations' where the file is silent; the file's
	// raised by what the annotations claim where it speaks.
	annEffect := policy.EffectMutate
	switch {
	case saysDestroys:
		annEffect = policy.EffectDestructive
	case readOnly:
		annEffect = policy.EffectRead
	case destructive:
		annEffect = policy.EffectDestructive
	}
	c := UpstreamClass{Effect: annEffect, OpenWorld: open}
	if o.Effect != "" {
		c.Effect = o.Effect
		if saysWrites && c.Effect == policy.EffectRead {
			c.Effect = policy.EffectMutate
		}
		if saysDestroys {
			c.Effect = policy.EffectDestructive
		}
	}

	// The authority: the file's, else from the effect and the idempotent
	// hint; then raised until it fits the effect.
	switch {
	case o.Authority != "":
		c.Authority = o.Authority
	case c.Effect == policy.EffectRead:
		c.Authority = policy.AuthorityRead
	case c.Effect == policy.EffectMutate && idempotent:
		c.Authority = policy.AuthorityWriteIdempotent
	case c.Effect == policy.EffectMutate:
		c.Authority = policy.AuthorityWriteNonIdempotent
	default:
		c.Authority = policy.AuthorityIrreversible
	}
	if saysNotIdempotent && c.Authority == policy.AuthorityWriteIdempotent {
		c.Authority = policy.AuthorityWriteNonIdempotent
	}
	if saysDestroys {
		c.Authority = policy.AuthorityIrreversible
	}
	fits := authorityForEffect[c.Effect]
	switch {
	case authorityRank[c.Authority] > authorityRank[fits[len(fits)-1]]:
		// An authority stricter than the effect allows: the effect rises.
		for _, e := range []policy.Effect{policy.EffectMutate, policy.EffectDestructive} {
			if slices.Contains(authorityForEffect[e], c.Authority) {
				c.Effect = e
				break
			}
		}
	case !slices.Contains(fits, c.Authority):
		// Looser than the effect allows: the strictest that fits.
		c.Authority = fits[len(fits)-1]
	}

	// Risk: the file's, never below what the effect implies once an
	// annotation raised the effect above the file's.
	c.Risk = policy.DefaultRisk(c.Effect)
	if o.Risk != "" {
		c.Risk = o.Risk
		if o.Effect != "" && effectRank[c.Effect] > effectRank[o.Effect] && riskRank[policy.DefaultRisk(c.Effect)] > riskRank[c.Risk] {
			c.Risk = policy.DefaultRisk(c.Effect)
		}
	}

	// The action class: the file's, else from the effect and reach. Among
	// the classes Gatehouse gives upstream calls, the annotations may
	// still pick a stricter one than the file's: a change the annotations
	// made of the file's read is not read.context, and a change that says
	// it reaches the open world is not tool.call.local.
	change := c.Effect != policy.EffectRead
	implied := ClassReadContext
	switch {
	case change && open:
		implied = ClassToolCallExternal
	case change:
		implied = ClassToolCallLocal
	}
	c.ActionClass = implied
	if o.ActionClass != "" {
		c.ActionClass = o.ActionClass
		switch {
		case change && o.ActionClass == ClassReadContext && (o.Effect == "" || o.Effect == policy.EffectRead):
			c.ActionClass = implied
		case change && saysOpen && o.ActionClass == ClassToolCallLocal:
			c.ActionClass = ClassToolCallExternal
		}
	}

	c.HumanGated = c.Authority == policy.AuthorityIrreversible
	if o.HumanGated != nil {
		c.HumanGated = *o.HumanGated
	}
	if c.Authority == policy.AuthorityIrreversible && !c.HumanGated {
		c.NotGatedReason = "The policy file declares it without human gating (human_gated: false)."
	}
	c.ApproverRole, c.RateLimits = o.ApproverRole, o.RateLimits
	c.Escalation, c.Quorum = o.Escalation, o.Quorum
	return c
}

// Forwarder sends calls to upstream tools (internal/mcp holds the
// clients). hash is the definition a declaration was made from: a call
// runs only while it is the accepted one.
type Forwarder interface {
	// Accepted reports, from what this instance knows, whether the
	// definition with hash is the tool's accepted one.
	Accepted(upstream, tool, hash string) bool
	// Forward checks the pin against the live definition again and calls
	// the tool with args, under ctx's deadline, returning the upstream's
	// result (a CallToolResult as JSON). An error is the call's failure.
	// retry says the call may be sent again after a transient failure (a
	// read or a write-idempotent tool): a call that may have taken effect
	// is never sent twice otherwise.
	Forward(ctx context.Context, upstream, tool, hash string, args json.RawMessage, retry bool) (json.RawMessage, error)
}

// DeclareUpstream is the registry declaration of an upstream tool: its
// calls classified by ClassifyUpstream from its annotations and the
// file's override, delivered by fw (an outside effect: run with no
// transaction open, under the upstream's timeout). A call is classified
// only while the definition is the accepted one, so a held tool's calls
// are blocked at every decision, at propose time and at the moment of
// effect; and it is forwarded only while the upstream's live definition
// is that one too (Forward).
func DeclareUpstream(cfg UpstreamConfig, u UpstreamTool, fw Forwarder) (Tool, error) {
	if o := cfg.Tools[u.Name]; o.Shadow() {
		// A shadow rule: declared as if the file said nothing of the tool,
		// with the override as its shadow (Tool.Shadow).
		return declareUpstreamShadow(cfg, u, fw, o)
	}
	hash, err := u.DefinitionHash()
	if err != nil {
		return Tool{}, err
	}
	o := cfg.Tools[u.Name]
	c := ClassifyUpstream(u.Annotations, o)
	class := c.ActionClass
	title := u.Title
	if title == "" {
		title = u.Annotations.Title
	}
	cheatsheet := o.Cheatsheet
	if cheatsheet == "" {
		cheatsheet = cfg.Cheatsheet
	}
	description := u.Description
	if description == "" {
		description = "A tool of the upstream " + cfg.Name + "."
	}
	upstream, name := cfg.Name, u.Name
	schema := u.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultUpstreamTimeout
	}
	retry := c.Authority == policy.AuthorityRead || c.Authority == policy.AuthorityWriteIdempotent
	return Tool{
		Name: u.DeclaredName(), Title: title, Description: description, Effect: c.Effect, Schema: schema,
		Upstream: cfg.Name, Cheatsheet: cheatsheet, Timeout: timeout,
		Contract: Contract{
			Authority: c.Authority, Risk: c.Risk,
			Classify: func(map[string]any, Workspace) string {
				if !fw.Accepted(upstream, name, hash) {
					return "" // held: the class gate blocks the call
				}
				return class
			},
			ActionClasses: []string{class},
			Gating: Gating{Required: c.HumanGated, ApproverRole: c.ApproverRole, NotGatedReason: c.NotGatedReason,
				Escalation: c.Escalation, Quorum: c.Quorum, Threshold: o.Threshold},
			Idempotency: Idempotency{Required: c.Authority == policy.AuthorityWriteNonIdempotent || c.Authority == policy.AuthorityIrreversible},
			RateLimits:  c.RateLimits,
			Summarize: func(map[string]any) string {
				return fmt.Sprintf("Call %s on the upstream %s", name, upstream)
			},
			ClassRationale: UpstreamRationale(u.Annotations, o, c),
			Reversibility:  upstreamReversibility(o, c),
			PIIFields:      o.PIIFields,
			SLA:            o.SLA,
		},
		Deliver: func(ctx context.Context, _ Workspace, args json.RawMessage) (Recorder, error) {
			result, err := fw.Forward(ctx, upstream, name, hash, args, retry)
			if err != nil {
				return nil, err
			}
			return func(context.Context, *db.Queries, uuid.UUID) (any, error) { return result, nil }, nil
		},
	}, nil
}

// UpstreamRationale says in words how an upstream tool came to its
// authority class: the policy file's reason, or what the file declared,
// or what its annotations (read as the worst case where a hint is
// missing) imply; and, where the annotations made the file's class
// stricter, that they did.
func UpstreamRationale(a Annotations, o UpstreamOverride, c UpstreamClass) string {
	fileSpeaks := o.Effect != "" || o.Authority != "" || o.ActionClass != ""
	var why string
	switch {
	case o.ClassRationale != "":
		why = "The policy file says: " + o.ClassRationale
	case fileSpeaks:
		var said []string
		for _, kv := range [][2]string{{"effect", string(o.Effect)}, {"authority", string(o.Authority)}, {"action_class", o.ActionClass}} {
			if kv[1] != "" {
				said = append(said, kv[0]+": "+kv[1])
			}
		}
		why = "The policy file declares it (" + strings.Join(said, ", ") + ") without a reason (class_rationale)."
	case c.Authority == policy.AuthorityRead:
		why = "Declared read-only by its annotations (readOnlyHint: true)."
	case c.Authority == policy.AuthorityWriteIdempotent:
		why = "Its annotations declare a change that is idempotent and not destructive (idempotentHint: true, destructiveHint: false)."
	case c.Authority == policy.AuthorityWriteNonIdempotent:
		why = "Its annotations declare a change and do not say it is idempotent, so repeating a call may repeat its effect."
	case a.Destructive != nil && *a.Destructive:
		why = "Its annotations say it may destroy data (destructiveHint: true), so it is taken as irreversible."
	default:
		why = "Its annotations do not say it is read-only or not destructive, so it is taken as the worst case: irreversible."
	}
	if fileSpeaks && o.Authority != "" && authorityRank[c.Authority] > authorityRank[o.Authority] {
		why += " Its annotations make it stricter than the file says: " + string(c.Authority) + "."
	}
	return why
}

// upstreamReversibility is the file's word on undoing the tool's effect,
// or the class's default; an irreversible tool's opens with "None via
// tools" whatever the file says.
func upstreamReversibility(o UpstreamOverride, c UpstreamClass) string {
	r := o.Reversibility
	if c.Authority == policy.AuthorityIrreversible && !strings.HasPrefix(strings.ToLower(r), strings.ToLower(NoneViaTools)) {
		if r == "" {
			return NoneViaTools + "."
		}
		return NoneViaTools + ". " + r
	}
	return r
}

// declareUpstreamShadow declares an upstream tool whose override is a
// shadow rule: enforced without it, decided under it as its shadow.
func declareUpstreamShadow(cfg UpstreamConfig, u UpstreamTool, fw Forwarder, o UpstreamOverride) (Tool, error) {
	enforced, shadowed := cfg, cfg
	enforced.Tools, shadowed.Tools = maps.Clone(cfg.Tools), maps.Clone(cfg.Tools)
	delete(enforced.Tools, u.Name)
	o.Mode = ""
	shadowed.Tools[u.Name] = o
	t, err := DeclareUpstream(enforced, u, fw)
	if err != nil {
		return Tool{}, err
	}
	s, err := DeclareUpstream(shadowed, u, fw)
	if err != nil {
		return Tool{}, err
	}
	t.Shadow = &s
	return t, nil
}
