package policy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// ClassGroup is how far an action class reaches, and so how it is gated.
type ClassGroup string

// Class groups, least to most guarded.
const (
	GroupInternal           ClassGroup = "internal"
	GroupExternalControlled ClassGroup = "external_controlled"
	GroupExternal           ClassGroup = "external"
	GroupHumanOnly          ClassGroup = "human_only"
)

// Valid reports whether g is a known group.
func (g ClassGroup) Valid() bool {
	switch g {
	case GroupInternal, GroupExternalControlled, GroupExternal, GroupHumanOnly:
		return true
	}
	return false
}

// classSyntax is lowercase dot notation with at least two segments.
var classSyntax = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

// canonicalClasses is built afresh on each call so no caller can change it.
func canonicalClasses() map[string]ClassGroup {
	return map[string]ClassGroup{
		"read.context":        GroupInternal,
		"draft.compose":       GroupInternal,
		"draft.response":      GroupInternal,
		"tool.call.local":     GroupInternal,
		"email.send.internal": GroupExternalControlled,
		"calendar.create":     GroupExternalControlled,
		"email.send.external": GroupExternal,
		"social.post.public":  GroupExternal,
		"proposal.submit":     GroupExternal,
		"payment.initiate":    GroupHumanOnly,
	}
}

// resolveAlias maps a legacy class name (already lowercased) to its
// canonical class; any other name is returned as is.
func resolveAlias(s string) string {
	switch s {
	case "relationship_followup_drafting", "draft_response_drafting", "workspace_trust_boundary":
		return "draft.response"
	case "referral_ask_drafting":
		return "draft.compose"
	case "social.post.external":
		return "social.post.public"
	case "calendar.create.external":
		return "calendar.create"
	case "payment.spend":
		return "payment.initiate"
	}
	return s
}

// CanonicalClass trims and lowercases s, resolves legacy aliases, and
// checks the result is dot notation with at least two segments. It only
// canonicalises; whether the class exists is the registry's question.
// Non-ASCII input is refused rather than case-folded, so no look-alike
// character can turn into a class name.
func CanonicalClass(s string) (string, error) {
	t := strings.TrimSpace(s)
	for i := range len(t) {
		if t[i] >= 0x80 {
			return "", fmt.Errorf("policy: action class %q is not ASCII", s)
		}
	}
	t = resolveAlias(strings.ToLower(t))
	if !classSyntax.MatchString(t) {
		return "", fmt.Errorf("policy: action class %q is not in dot notation", s)
	}
	return t, nil
}

// ClassRegistry is the set of action classes a workspace knows, each with
// its group. It is immutable once built.
type ClassRegistry struct {
	groups map[string]ClassGroup
}

// DefaultClasses is the registry of the canonical classes alone.
func DefaultClasses() *ClassRegistry {
	return &ClassRegistry{groups: canonicalClasses()}
}

// NewClassRegistry is the canonical classes plus a workspace's local ones.
// A local class must be in dot notation, in a known group, and neither a
// canonical class nor a legacy alias; two local names that canonicalise
// alike are refused too.
func NewClassRegistry(local map[string]ClassGroup) (*ClassRegistry, error) {
	groups := canonicalClasses()
	for _, name := range slices.Sorted(maps.Keys(local)) {
		group := local[name]
		class, err := CanonicalClass(name)
		if err != nil {
			return nil, fmt.Errorf("policy: local class: %w", err)
		}
		if plain := strings.ToLower(strings.TrimSpace(name)); plain != class {
			return nil, fmt.Errorf("policy: local class %q is a legacy alias of %q", name, class)
		}
		if _, taken := groups[class]; taken {
			return nil, fmt.Errorf("policy: local class %q is already defined", name)
		}
		if !group.Valid() {
			return nil, fmt.Errorf("policy: local class %q has unknown group %q", name, group)
		}
		groups[class] = group
	}
	return &ClassRegistry{groups: groups}, nil
}

// Group is the group of class, canonicalised first; false when class is not
// valid or not known. A nil registry knows no class.
func (r *ClassRegistry) Group(class string) (ClassGroup, bool) {
	if r == nil {
		return "", false
	}
	// Every key is canonical, so a class found as given is its own
	// canonical form: most calls are classified without the regexp.
	if g, ok := r.groups[class]; ok {
		return g, true
	}
	c, err := CanonicalClass(class)
	if err != nil {
		return "", false
	}
	g, ok := r.groups[c]
	return g, ok
}

// Classes lists every class the registry knows, sorted.
func (r *ClassRegistry) Classes() []string {
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(r.groups))
}
