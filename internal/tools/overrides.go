package tools

import (
	"fmt"
	"slices"

	"github.com/gatehouse/gatehouse/internal/policy"
)

// ApplyOverrides applies the policy file's overrides of built-in tools
// (PolicyFile.Tools) to the registry: each named tool's contract is
// declared again with what the file says, and checked as any declaration
// is (an authority that does not fit the effect, a bad threshold or
// constraint stops it, naming the tool and the file's line). A file that
// changes a tool's class (effect, authority, action class or risk) must
// say why (class_rationale): that reason is the contract's, shown on
// /tools and in GET /api/v1/tools. Rate limits named by the file replace
// the tool's whole set; constraints are added to the tool's own. A bad
// file leaves the registry as it was.
func ApplyOverrides(r *Registry, f *PolicyFile) error {
	if f == nil || len(f.Tools) == 0 {
		return nil
	}
	names := make([]string, 0, len(f.Tools))
	for name := range f.Tools {
		names = append(names, name)
	}
	slices.Sort(names)
	decls := make([]Tool, 0, len(names))
	for _, name := range names {
		o := f.Tools[name]
		cur, ok := r.Get(name)
		if !ok || cur.Upstream != "" {
			return fmt.Errorf("policy file: line %d: tools: %q is not a built-in tool (an upstream's tools are overridden under its upstream)", o.Line, name)
		}
		d, err := declareOverride(cur, name, o)
		if err != nil {
			return err
		}
		decls = append(decls, d)
	}
	if err := r.Override(decls); err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	return nil
}

// declareOverride is the declaration of the built-in tool cur (named
// name) under the file's override o: o applied (overrideBuiltin), or, for
// a shadow rule (mode: shadow), cur as it is with o applied as its shadow.
func declareOverride(cur *Tool, name string, o UpstreamOverride) (Tool, error) {
	if !o.Shadow() {
		return overrideBuiltin(cur, name, o)
	}
	shadow, err := overrideBuiltin(cur, name, o)
	if err != nil {
		return Tool{}, err
	}
	d := *cur
	d.compiled = nil
	d.Shadow = &shadow
	return d, nil
}

// neverLoosens refuses an override that would call a built-in tool's
// effect less than what its code does (records.put a read), or loosen a
// destructive tool's path: its authority class, its risk or its human
// gate lowered. Such a file is refused naming its line, and nothing of it
// applies; a tool's limits, thresholds and constraints may still be set.
func neverLoosens(cur *Tool, name string, o UpstreamOverride) error {
	refuse := func(what string) error {
		return fmt.Errorf("policy file: line %d: %s: %s would loosen it; an override of a built-in tool may only make it stricter", o.Line, name, what)
	}
	if o.Effect != "" && effectRank[o.Effect] < effectRank[cur.Effect] {
		return refuse(fmt.Sprintf("effect %s (its code is %s)", o.Effect, cur.Effect))
	}
	if cur.Effect != policy.EffectDestructive {
		return nil
	}
	c := cur.Contract
	switch {
	case o.Authority != "" && authorityRank[o.Authority] < authorityRank[c.Authority]:
		return refuse(fmt.Sprintf("authority %s (a destructive tool, %s)", o.Authority, c.Authority))
	case o.Risk != "" && riskRank[o.Risk] < riskRank[c.Risk]:
		return refuse(fmt.Sprintf("risk %s (a destructive tool, %s)", o.Risk, c.Risk))
	case o.HumanGated != nil && !*o.HumanGated && c.Gating.Required:
		return refuse("human_gated: false (a destructive tool a person must approve)")
	}
	return nil
}

// overrideBuiltin is the declaration of the built-in tool cur (named
// name) with what the file's override o says of it (see ApplyOverrides).
func overrideBuiltin(cur *Tool, name string, o UpstreamOverride) (Tool, error) {
	if err := neverLoosens(cur, name, o); err != nil {
		return Tool{}, err
	}
	d := *cur
	d.compiled, d.Shadow, d.ShadowRule = nil, nil, ""
	c := &d.Contract
	classChanged := false
	if o.Effect != "" && o.Effect != d.Effect {
		d.Effect, classChanged = o.Effect, true
	}
	if o.Authority != "" && o.Authority != c.Authority {
		if c.RateLimits == rateLimitsByAuthority[c.Authority] {
			c.RateLimits = RateLimits{} // the old class's default: the new class's instead
		}
		c.Authority, classChanged = o.Authority, true
		c.Retention, c.Idempotency.Window = 0, 0 // the new class's
		if o.Authority == policy.AuthorityWriteNonIdempotent || o.Authority == policy.AuthorityIrreversible {
			c.Idempotency.Required = true // the class requires a key
		}
	}
	if o.ActionClass != "" && (o.ActionClass != c.ActionClass || c.Classify != nil) {
		c.ActionClass, c.ActionClasses, c.Classify, classChanged = o.ActionClass, []string{o.ActionClass}, nil, true
	}
	if o.Risk != "" && o.Risk != c.Risk {
		c.Risk, classChanged = o.Risk, true
	}
	if classChanged && o.ClassRationale == "" {
		return Tool{}, fmt.Errorf("policy file: line %d: %s: the file changes its class (effect, authority, action class or risk): say why in class_rationale", o.Line, name)
	}
	if o.HumanGated != nil {
		c.Gating.Required = *o.HumanGated
		if !c.Gating.Required && c.Authority == policy.AuthorityIrreversible && c.Gating.NotGatedReason == "" {
			c.Gating.NotGatedReason = "The policy file declares it without human gating (human_gated: false)."
		}
	}
	if o.Threshold != "" {
		c.Gating.Threshold = o.Threshold
	}
	if o.ApproverRole != "" {
		c.Gating.ApproverRole = o.ApproverRole
	}
	if o.Escalation != (Escalation{}) {
		c.Gating.Escalation = o.Escalation
	}
	if o.Quorum > 0 {
		c.Gating.Quorum = o.Quorum
	}
	if o.RateLimits != (RateLimits{}) {
		c.RateLimits = o.RateLimits
	}
	c.Constraints = append(slices.Clone(c.Constraints), o.Constraints...)
	if o.ClassRationale != "" {
		c.ClassRationale = o.ClassRationale
	}
	if o.Reversibility != "" {
		c.Reversibility = o.Reversibility
	}
	if o.PIIFields != nil {
		c.PIIFields = o.PIIFields
	}
	if o.SLA != (SLA{}) {
		c.SLA = o.SLA
	}
	if o.Cheatsheet != "" {
		d.Cheatsheet = o.Cheatsheet
	}
	return d, nil
}
