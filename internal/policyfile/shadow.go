package policyfile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/internal/rollup"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Shadow rules are overrides marked mode: shadow: the call is decided as
// the file would without them, and also under them (internal/proposals,
// shadow.go), what they would have decided kept in the call's audit row
// when it differs. The counts per rule are folded from the audit log off
// the call path (the 'shadow_rules' roll-up feed), so a rule can be
// promoted (mode: shadow removed, the file reloaded) with evidence.

// ShadowFeed is the roll-up's name for the shadow rules' counts.
const ShadowFeed = "shadow_rules"

// shadowBatch is how many audit rows one turn folds at most.
const shadowBatch = 5000

// shadowFeed folds the audit rows' shadow verdicts into shadow_counts.
func shadowFeed() rollup.Feed {
	return rollup.Feed{Name: ShadowFeed, Tables: []string{"audit_events"}, GenericPlans: true,
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.AuditHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
			end, err := q.AuditBatchEnd(ctx, db.AuditBatchEndParams{After: after, Upto: upto, MaxRows: shadowBatch})
			if err != nil {
				return 0, err
			}
			return end, q.FoldShadowCounts(ctx, db.FoldShadowCountsParams{After: after, Upto: end})
		},
	}
}

// RollUpShadow takes one turn of the shadow rules' roll-up (on every
// instance: one at a time folds).
func RollUpShadow(ctx context.Context, pool *pgxpool.Pool) (rollup.Progress, error) {
	return rollup.Advance(ctx, pool, shadowFeed())
}

// noteShadowRules remembers the registry's shadow rules (when each was
// first loaded: its counts run from then).
func (l *Loader) noteShadowRules(ctx context.Context) {
	if l.q == nil {
		return
	}
	var p db.NoteShadowRulesParams
	for _, t := range l.cfg.Registry.List() {
		if t.Shadow != nil {
			p.Rules, p.Tools = append(p.Rules, t.ShadowRule), append(p.Tools, t.Name)
		}
	}
	if len(p.Rules) == 0 {
		return
	}
	if err := l.q.NoteShadowRules(ctx, p); err != nil && ctx.Err() == nil {
		l.cfg.Log.Warn("remembering the shadow rules", "err", err)
	}
}

// ShadowRule is one shadow rule in force and what it would have changed
// on the workspace's calls since it was added.
type ShadowRule struct {
	Tool string
	// Rule identifies it (a hash of the declaration it makes).
	Rule string
	// Since is when an instance first loaded it (zero: not recorded yet).
	Since time.Time
	// Changes says what the rule changes of the tool's declaration.
	Changes []string
	// Counts by kind: replay.NewlyAsks (would now ask a person),
	// NewlyAllowed (would no longer ask), NewlyBlocked, Restated.
	Counts map[replay.Kind]int64
}

// ShadowRules are the shadow rules in force on this instance, by tool,
// with their counts in the workspace: the roll-up's plus the audit rows
// it has not folded yet, read in one statement.
func (l *Loader) ShadowRules(ctx context.Context, ws uuid.UUID) ([]ShadowRule, error) {
	if l == nil {
		return nil, nil
	}
	var out []ShadowRule
	var rules []string
	for _, t := range l.cfg.Registry.List() {
		if t.Shadow == nil {
			continue
		}
		out = append(out, ShadowRule{Tool: t.Name, Rule: t.ShadowRule, Changes: ShadowChanges(t, t.Shadow), Counts: map[replay.Kind]int64{}})
		rules = append(rules, t.ShadowRule)
	}
	if len(out) == 0 || l.q == nil {
		return out, nil
	}
	seen, err := l.q.ListShadowRules(ctx, rules)
	if err != nil {
		return nil, fmt.Errorf("policyfile: shadow rules: %w", err)
	}
	counts, err := l.q.ShadowCounts(ctx, db.ShadowCountsParams{WorkspaceID: ws, Rules: rules})
	if err != nil {
		return nil, fmt.Errorf("policyfile: shadow counts: %w", err)
	}
	for i := range out {
		for _, s := range seen {
			if s.Rule == out[i].Rule {
				out[i].Since = s.AddedAt
			}
		}
		for _, c := range counts {
			if c.Rule == out[i].Rule {
				out[i].Counts[replay.Kind(c.Kind)] += c.Calls
			}
		}
	}
	return out, nil
}

// ShadowChanges says, field by field, what a shadow rule's declaration
// changes of the tool's ("risk medium → high", "threshold value.amount >
// 100").
func ShadowChanges(enforced, shadow *tools.Tool) []string {
	var out []string
	add := func(what string, a, b any) {
		if a != b {
			out = append(out, fmt.Sprintf("%s %v → %v", what, orNone(a), orNone(b)))
		}
	}
	e, s := enforced.Contract, shadow.Contract
	add("effect", enforced.Effect, shadow.Effect)
	add("authority", e.Authority, s.Authority)
	add("risk", e.Risk, s.Risk)
	add("action class", e.ActionClass, s.ActionClass)
	add("human gated", e.Gating.Required, s.Gating.Required)
	add("threshold", e.Gating.Threshold, s.Gating.Threshold)
	add("approver role", e.Gating.ApproverRole, s.Gating.ApproverRole)
	add("quorum", e.Gating.Quorum, s.Gating.Quorum)
	if !slices.EqualFunc(e.Constraints, s.Constraints, func(a, b policy.Constraint) bool { return a.Kind == b.Kind }) {
		out = append(out, "constraints")
	}
	if e.RateLimits != s.RateLimits {
		out = append(out, "rate limits")
	}
	if len(out) == 0 {
		out = append(out, "nothing the decision reads")
	}
	return out
}

func orNone(v any) any {
	switch x := v.(type) {
	case string:
		if x == "" {
			return "none"
		}
	case policy.Risk:
		if x == "" {
			return "none"
		}
	case policy.Authority:
		if x == "" {
			return "none"
		}
	}
	return v
}
