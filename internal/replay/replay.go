// Package replay answers "what would this policy file have done to the
// calls we recorded?": it decides every recorded call of a period again,
// with the same pure decision (policy.Decide) and the inputs the call was
// decided on (proposals.decision_input), once as recorded and once under
// the candidate file, and counts what would change, per tool and action
// class. It reads the history a page at a time, keeps only counts and a
// few examples, and writes nothing.
package replay

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Kind is one way a call's decision can change.
type Kind string

// Kinds of change. A call's outcome is one of three: it runs without
// asking anyone (allowed, with or without constraints), it asks a person
// (review_required, deferred, human_only), or it is blocked.
const (
	// NewlyAsks: it ran without asking, or was blocked, and would now ask
	// a person.
	NewlyAsks Kind = "newly-asks"
	// NewlyAllowed: it asked a person, or was blocked, and would now run
	// without asking.
	NewlyAllowed Kind = "newly-allowed"
	// NewlyAllowedDestructive: newly allowed, and destructive as recorded
	// or under the candidate.
	NewlyAllowedDestructive Kind = "newly-allowed-destructive"
	// NewlyBlocked: it ran or asked a person, and would now be blocked.
	NewlyBlocked Kind = "newly-blocked"
	// Restated: same outcome, another state (review_required by the owner
	// becomes deferred to an approver, allowed gains constraints).
	Restated Kind = "restated"
	// Changed is any of the above (for --fail-on).
	Changed Kind = "changed"
)

// Kinds lists every kind a replay counts, in report order.
var Kinds = []Kind{NewlyAsks, NewlyAllowed, NewlyAllowedDestructive, NewlyBlocked, Restated}

// ParseKinds reads a comma-separated list of kinds (--fail-on); "changed"
// stands for any change.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, part := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(part))
		if k == "" {
			continue
		}
		if !slices.Contains(Kinds, k) && k != Changed {
			names := make([]string, 0, len(Kinds)+1)
			for _, k := range append(slices.Clone(Kinds), Changed) {
				names = append(names, string(k))
			}
			return nil, fmt.Errorf("unknown kind %q (want %s)", k, strings.Join(names, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("name at least one kind")
	}
	return out, nil
}

// Counts are what changed among a set of calls.
type Counts struct {
	// Calls were read; Unchanged would be decided exactly as recorded.
	Calls     int `json:"calls"`
	Unchanged int `json:"unchanged"`
	// One count per Kind.
	NewlyAsks               int `json:"newly_asks"`
	NewlyAllowed            int `json:"newly_allowed"`
	NewlyAllowedDestructive int `json:"newly_allowed_destructive"`
	NewlyBlocked            int `json:"newly_blocked"`
	Restated                int `json:"restated"`
	// ApprovalsSaved are calls that asked a person and would not;
	// ApprovalsCost calls that did not and would.
	ApprovalsSaved int `json:"approvals_saved"`
	ApprovalsCost  int `json:"approvals_cost"`
	// Overruled are newly allowed calls that a person rejected or edited
	// when they were asked: what the file would let through that people
	// did not want as proposed.
	Overruled int `json:"overruled"`
}

// Of is the count of one kind (Changed: every call that changed).
func (c Counts) Of(k Kind) int {
	switch k {
	case NewlyAsks:
		return c.NewlyAsks
	case NewlyAllowed:
		return c.NewlyAllowed
	case NewlyAllowedDestructive:
		return c.NewlyAllowedDestructive
	case NewlyBlocked:
		return c.NewlyBlocked
	case Restated:
		return c.Restated
	case Changed:
		return c.Calls - c.Unchanged
	}
	return 0
}

// Group is what changed among the calls of one tool and action class.
type Group struct {
	Tool string `json:"tool"`
	// ActionClass is the class the calls were recorded as
	// ("(unclassified)": none).
	ActionClass string `json:"action_class"`
	// Covered: the candidate file declares the tool's upstream, so its
	// calls were decided under the file; otherwise as recorded.
	Covered bool `json:"covered"`
	Counts
	// Examples are the first calls of each kind (at most Options.Examples).
	Examples map[Kind][]Example `json:"examples"`
}

// Example is one call whose decision would change.
type Example struct {
	ID          uuid.UUID    `json:"id"`
	WorkspaceID uuid.UUID    `json:"workspace_id"`
	CreatedAt   time.Time    `json:"created_at"`
	Before      policy.State `json:"before"`
	After       policy.State `json:"after"`
	// Status is the call's recorded status (applied, rejected…); Edited
	// says a person changed its arguments before it ran.
	Status string `json:"status"`
	Edited bool   `json:"edited"`
}

// Report is a replay's result.
type Report struct {
	// Since and Until are the period read; WorkspaceID the workspace
	// (nil: every workspace).
	Since       time.Time  `json:"since"`
	Until       time.Time  `json:"until"`
	WorkspaceID *uuid.UUID `json:"workspace_id"`
	// Totals add up every group.
	Totals Counts `json:"totals"`
	// Covered calls were decided under the file; NotCovered as recorded
	// (built-in tools and tools of upstreams the file does not declare).
	Covered    int `json:"covered"`
	NotCovered int `json:"not_covered"`
	// Unreadable calls have no recorded inputs, or inputs that do not
	// decode: counted, not decided; UnreadableExamples are the first ids.
	Unreadable         int         `json:"unreadable"`
	UnreadableExamples []uuid.UUID `json:"unreadable_examples"`
	// NoAnnotations are covered tools with no pinned definition: their
	// calls were decided as if the upstream gave no hints.
	NoAnnotations []string `json:"no_annotations"`
	Groups        []Group  `json:"groups"`
	// StoppedEarly is set when the time allowed ran out: the report covers
	// the calls up to ReadUntil (the last call read) only.
	StoppedEarly bool       `json:"stopped_early"`
	ReadUntil    *time.Time `json:"read_until"`
}

// Occurred are the kinds among want that occurred at least once.
func (r Report) Occurred(want []Kind) []Kind {
	var out []Kind
	for _, k := range want {
		if r.Totals.Of(k) > 0 {
			out = append(out, k)
		}
	}
	return out
}

// Call is one recorded call as the replay reads it.
type Call struct {
	ID          uuid.UUID
	WorkspaceID uuid.UUID
	Tool        string
	Status      string
	Edited      bool
	// Input is the policy.Call it was decided on, as JSON (nil: none kept).
	Input     []byte
	CreatedAt time.Time
}

// Candidate is a policy file as the replay applies it to recorded calls.
type Candidate struct {
	upstreams map[string]tools.UpstreamConfig
	// annotations are the upstream tools' pinned hints, by declared name.
	annotations map[string]tools.Annotations
	// builtin reports whether a tool is one of Gatehouse's own (never an
	// upstream's, whatever its name's prefix).
	builtin func(string) bool
	// overrides are the file's overrides of built-in tools (its tools:).
	overrides map[string]tools.UpstreamOverride
}

// NewCandidate is file applied to calls: annotations are the upstream
// tools' pinned hints by declared name (<upstream>.<tool>); builtin says
// which tools are Gatehouse's own.
func NewCandidate(file *tools.PolicyFile, annotations map[string]tools.Annotations, builtin func(string) bool) *Candidate {
	c := &Candidate{upstreams: map[string]tools.UpstreamConfig{}, annotations: annotations, builtin: builtin}
	if file != nil {
		// A shadow rule (mode: shadow) is not enforced: the file is
		// replayed as it would be enforced, without it.
		for _, u := range file.Upstreams {
			u.Tools = enforced(u.Tools)
			c.upstreams[u.Name] = u
		}
		c.overrides = enforced(file.Tools)
	}
	return c
}

// Covers reports whether the file declares the tool: an upstream tool of
// an upstream the file names.
func (c *Candidate) Covers(tool string) bool {
	if c.builtin != nil && c.builtin(tool) {
		_, overridden := c.overrides[tool]
		return overridden
	}
	upstream, _, ok := strings.Cut(tool, ".")
	_, declared := c.upstreams[upstream]
	return ok && declared
}

// apply makes call what the server would have decided on under the file:
// the contract fields the decision reads, from the file's override (none:
// the annotations alone) combined with the tool's annotations by
// tools.ClassifyUpstream, as the server declares the tool. What the call
// was decided on besides (scope, mode, trust level, token, workspace
// setting, open violations, constraints) stays as recorded, and so does
// an empty action class: the tool was held then (its definition not
// accepted), which no file changes.
func (c *Candidate) apply(call *policy.Call, tool string) {
	if o, ok := c.overrides[tool]; ok && c.builtin != nil && c.builtin(tool) {
		applyBuiltin(call, o)
		return
	}
	upstream, name, _ := strings.Cut(tool, ".")
	cls := tools.ClassifyUpstream(c.annotations[tool], c.upstreams[upstream].Tools[name])
	call.Effect, call.Risk = cls.Effect, cls.Risk
	call.HumanGated, call.ApproverRole = cls.HumanGated, cls.ApproverRole
	if call.ActionClass != "" {
		call.ActionClass = cls.ActionClass
	}
}

// outcome is what became of a call: it ran, asked a person, or was
// blocked.
type outcome int

const (
	runs outcome = iota
	asks
	blocked
)

func outcomeOf(s policy.State) outcome {
	switch {
	case s.RunsWithoutAsking():
		return runs
	case s.Rank() >= policy.StateBlocked.Rank(): // an unknown state ranks as blocked
		return blocked
	}
	return asks
}

// kindOf is how the decision changed from before to after ("": it did not).
func kindOf(before, after policy.State) Kind {
	b, a := outcomeOf(before), outcomeOf(after)
	switch {
	case before == after:
		return ""
	case b == a:
		return Restated
	case a == asks:
		return NewlyAsks
	case a == runs:
		return NewlyAllowed
	}
	return NewlyBlocked
}

// Tally adds calls up as they are read: memory bounded by the number of
// tools and classes, never by the number of calls.
type Tally struct {
	candidate *Candidate
	classes   *policy.ClassRegistry
	examples  int
	groups    map[[2]string]*Group
	report    Report
	noAnn     map[string]bool
	last      time.Time
}

// NewTally counts calls decided under candidate, keeping up to examples
// example calls of each kind in each group.
func NewTally(candidate *Candidate, classes *policy.ClassRegistry, examples int) *Tally {
	return &Tally{candidate: candidate, classes: classes, examples: max(examples, 0), groups: map[[2]string]*Group{}, noAnn: map[string]bool{}}
}

// Add decides one recorded call as recorded and under the candidate, and
// counts it.
func (t *Tally) Add(c Call) {
	t.last = c.CreatedAt
	covered := t.candidate.Covers(c.Tool)
	var recorded, candidate policy.Call
	before, after, err := policy.Redecide(c.Input, t.classes, func(call *policy.Call) {
		recorded = *call
		if covered {
			t.candidate.apply(call, c.Tool)
		}
		candidate = *call
	})
	if err != nil {
		t.report.Unreadable++
		if len(t.report.UnreadableExamples) < t.examples {
			t.report.UnreadableExamples = append(t.report.UnreadableExamples, c.ID)
		}
		return
	}
	if covered {
		t.report.Covered++
		if _, ok := t.candidate.annotations[c.Tool]; !ok {
			t.noAnn[c.Tool] = true
		}
	} else {
		t.report.NotCovered++
	}
	class := recorded.ActionClass
	if class == "" {
		class = "(unclassified)"
	}
	key := [2]string{c.Tool, class}
	g := t.groups[key]
	if g == nil {
		g = &Group{Tool: c.Tool, ActionClass: class, Covered: covered, Examples: map[Kind][]Example{}}
		t.groups[key] = g
	}
	kind := kindOf(before.State, after.State)
	destructive := kind == NewlyAllowed && (recorded.Effect == policy.EffectDestructive || candidate.Effect == policy.EffectDestructive)
	overruled := kind == NewlyAllowed && (c.Status == "rejected" || c.Edited)
	askedBefore, asksAfter := outcomeOf(before.State) == asks, outcomeOf(after.State) == asks
	for _, counts := range []*Counts{&g.Counts, &t.report.Totals} {
		counts.count(kind, destructive, overruled, askedBefore, asksAfter)
	}
	if kind == "" {
		return
	}
	ex := Example{ID: c.ID, WorkspaceID: c.WorkspaceID, CreatedAt: c.CreatedAt, Before: before.State, After: after.State, Status: c.Status, Edited: c.Edited}
	kinds := []Kind{kind}
	if destructive {
		kinds = append(kinds, NewlyAllowedDestructive)
	}
	for _, k := range kinds {
		if len(g.Examples[k]) < t.examples {
			g.Examples[k] = append(g.Examples[k], ex)
		}
	}
}

func (c *Counts) count(kind Kind, destructive, overruled, askedBefore, asksAfter bool) {
	c.Calls++
	switch kind {
	case "":
		c.Unchanged++
	case NewlyAsks:
		c.NewlyAsks++
	case NewlyAllowed:
		c.NewlyAllowed++
	case NewlyBlocked:
		c.NewlyBlocked++
	case Restated:
		c.Restated++
	}
	if destructive {
		c.NewlyAllowedDestructive++
	}
	if overruled {
		c.Overruled++
	}
	switch {
	case askedBefore && !asksAfter:
		c.ApprovalsSaved++
	case !askedBefore && asksAfter:
		c.ApprovalsCost++
	}
}

// Report is what the calls added so far would change, groups ordered by
// tool and class.
func (t *Tally) Report() Report {
	r := t.report
	r.Groups = make([]Group, 0, len(t.groups))
	for _, g := range t.groups {
		r.Groups = append(r.Groups, *g)
	}
	sort.Slice(r.Groups, func(i, j int) bool {
		if r.Groups[i].Tool != r.Groups[j].Tool {
			return r.Groups[i].Tool < r.Groups[j].Tool
		}
		return r.Groups[i].ActionClass < r.Groups[j].ActionClass
	})
	r.NoAnnotations = make([]string, 0, len(t.noAnn))
	for tool := range t.noAnn {
		r.NoAnnotations = append(r.NoAnnotations, tool)
	}
	slices.Sort(r.NoAnnotations)
	if r.UnreadableExamples == nil {
		r.UnreadableExamples = []uuid.UUID{}
	}
	if !t.last.IsZero() {
		last := t.last
		r.ReadUntil = &last
	}
	return r
}

// applyBuiltin makes call what the server would have decided on under a
// file's override of a built-in tool (tools.ApplyOverrides): its effect,
// risk, gating, approver role, class and constraints where the file names
// them. A threshold is not replayed: whether a call exceeded it needs the
// call's arguments, which the decision's inputs do not keep.
func applyBuiltin(call *policy.Call, o tools.UpstreamOverride) {
	if o.Effect != "" {
		call.Effect = o.Effect
	}
	if o.Risk != "" {
		call.Risk = o.Risk
	}
	if o.HumanGated != nil {
		call.HumanGated = *o.HumanGated
	}
	if o.ApproverRole != "" {
		call.ApproverRole = o.ApproverRole
	}
	if o.ActionClass != "" && call.ActionClass != "" {
		call.ActionClass = o.ActionClass
	}
	for _, k := range o.Constraints {
		call.Constraints = append(call.Constraints, k.Kind)
	}
}

// KindOf is how a decision changes from before to after ("": it does
// not): the replay's words for a change, shared with the shadow rules'
// live evidence (internal/proposals).
func KindOf(before, after policy.State) Kind { return kindOf(before, after) }

// enforced are the overrides that are not shadow rules.
func enforced(overrides map[string]tools.UpstreamOverride) map[string]tools.UpstreamOverride {
	out := make(map[string]tools.UpstreamOverride, len(overrides))
	for name, o := range overrides {
		if !o.Shadow() {
			out[name] = o
		}
	}
	return out
}
