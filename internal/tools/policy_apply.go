package tools

import (
	"fmt"
	"slices"
	"strings"
)

// A policy file governs every declaration of the registry: the built-in
// tools (their own declarations, with the file's overrides), the caller
// tools and the upstreams' tools. At start and on every reload the whole
// set is declared again in one snapshot (ReplacePolicy), so that no call
// is ever decided under part of one file and part of another.

// CheckPolicy reports whether f can be put in force on this registry,
// without changing it: its overrides of built-in tools and its caller
// tools checked as declarations, and its upstreams' names free. Every
// error names the file's line.
func (r *Registry) CheckPolicy(f *PolicyFile) error {
	decls, err := r.policyDeclarations(f)
	if err != nil {
		return err
	}
	if f != nil {
		for _, u := range f.Upstreams {
			for _, name := range r.baseNames {
				if prefix, _, _ := strings.Cut(name, "."); prefix == u.Name {
					return fmt.Errorf("policy file: line %d: upstream %q would share its name with the built-in tool %s", u.Line, u.Name, name)
				}
			}
		}
	}
	if _, err := r.build(nil, decls); err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	return nil
}

// ReplacePolicy declares, in one snapshot, everything f governs: the
// built-in tools as the registry was made with them and as f overrides
// them, f's caller tools, and upstreams' tools (by upstream name, each
// upstream's whole set, as its listing declares them; an upstream not
// named has none). Whatever was declared before and is not among these is
// gone. A bad declaration leaves the registry as it was and is returned,
// naming the file's line. The OnChange listeners are told, as after any
// replacement.
func (r *Registry) ReplacePolicy(f *PolicyFile, upstreams map[string][]Tool) error {
	decls, err := r.policyDeclarations(f)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(upstreams))
	for name := range upstreams {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, d := range upstreams[name] {
			if d.Upstream != name {
				return fmt.Errorf("tools: %s is not a tool of upstream %s", d.Name, name)
			}
			decls = append(decls, d)
		}
	}
	if err := r.replace(func(*Tool) bool { return false }, decls, nil); err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	r.SetCallerDeclarations(f) // caller_declarations (caller_declaration.go)
	return nil
}

// policyDeclarations are the built-in tools as f overrides them (those it
// does not name as the registry was made with them) and f's caller tools,
// each as it will be declared. A name f overrides that is no built-in
// tool, a class change without a reason, or a caller tool named like a
// built-in one is an error naming the line.
func (r *Registry) policyDeclarations(f *PolicyFile) ([]Tool, error) {
	var overrides map[string]UpstreamOverride
	if f != nil {
		overrides = f.Tools
	}
	for name, o := range overrides {
		if _, ok := r.base[name]; !ok {
			return nil, fmt.Errorf("policy file: line %d: tools: %q is not a built-in tool (an upstream's tools are overridden under its upstream)", o.Line, name)
		}
	}
	decls := make([]Tool, 0, len(r.baseNames))
	for _, name := range r.baseNames {
		base := r.base[name]
		o, ok := overrides[name]
		if !ok {
			d := *base
			d.compiled = nil
			decls = append(decls, d)
			continue
		}
		d, err := declareOverride(base, name, o)
		if err != nil {
			return nil, err
		}
		decls = append(decls, d)
	}
	if f == nil {
		return decls, nil
	}
	for _, c := range f.CallerTools {
		if _, taken := r.base[c.Name]; taken {
			return nil, fmt.Errorf("policy file: line %d: caller_tools: %s is the name of a tool Gatehouse runs; choose another", c.Line, c.Name)
		}
		d := c.Declaration()
		if _, err := r.prepare(d); err != nil {
			return nil, fmt.Errorf("policy file: line %d: caller_tools: %w", c.Line, err)
		}
		decls = append(decls, d)
	}
	return decls, nil
}
