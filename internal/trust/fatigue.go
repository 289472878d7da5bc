package trust

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Approval fatigue (issue 27 item 5; ADR-036's reversal criterion): per
// action class and tool, how people decided its calls over the last
// FatigueDays days, and what that suggests. The numbers come from the
// calls' days the roll-up keeps (internal/intent), never from history.

// FatigueDays is how many UTC days the numbers cover, today included.
const FatigueDays = 30

// The suggestion rule: over at least FatigueMinDecisions decisions, a
// share of fast approvals above FatigueFastShare suggests less review (re-
// tier or grant); a share of rejections of at least FatigueRejectedShare
// suggests tightening, and wins when both hold (a class people refuse this
// often is not harmless, however fast the rest were approved).
const (
	FatigueMinDecisions  = 10
	FatigueFastShare     = 0.5
	FatigueRejectedShare = 0.3
)

// Suggestion is what the numbers suggest for a class and tool.
type Suggestion string

// The suggestions.
const (
	SuggestNothing Suggestion = "none"
	// SuggestLessReview: approved as proposed within 5 minutes more than
	// half the time: re-tier the tool, or grant its calls.
	SuggestLessReview Suggestion = "retier_or_grant"
	// SuggestTighten: rejected often.
	SuggestTighten Suggestion = "tighten"
)

// Suggest applies the rule to a class and tool's decisions.
func Suggest(decisions, fastApprovals, rejections int64) Suggestion {
	if decisions < FatigueMinDecisions {
		return SuggestNothing
	}
	switch {
	case float64(rejections) >= FatigueRejectedShare*float64(decisions):
		return SuggestTighten
	case float64(fastApprovals) > FatigueFastShare*float64(decisions):
		return SuggestLessReview
	}
	return SuggestNothing
}

// ToolFatigue is how people decided the calls of one action class and tool.
type ToolFatigue struct {
	ActionClass, Tool string
	// Decisions a person made (a confirm card or an approval packet,
	// approved or rejected; never a call run automatically or under a
	// grant), of which Approvals approved, FastApprovals approved as
	// proposed (no edit) within intent.FastApproval, Rejections rejected.
	Decisions, Approvals, FastApprovals, Rejections int64
	// MedianDecision is the median time from the proposal to the person's
	// decision, read from a log-scale histogram (intent.MedianSeconds):
	// approximate, within its bucket (about 19 % wide).
	MedianDecision time.Duration
	Suggestion     Suggestion
	// Ungrantable says why calls of this tool and class can never be
	// granted ("" when they can; policy.Ungrantable), or that the tool is
	// not known any more.
	Ungrantable string
}

// FastShare is the share of the decisions that were fast approvals (0 to 1).
func (f ToolFatigue) FastShare() float64 { return ratio(f.FastApprovals, f.Decisions) }

// RejectedShare is the share of the decisions that were rejections (0 to 1).
func (f ToolFatigue) RejectedShare() float64 { return ratio(f.Rejections, f.Decisions) }

func ratio(n, of int64) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Fatigue is the approval-fatigue numbers of a workspace.
type Fatigue struct {
	// From and Until are the period: whole UTC days, [From, Until).
	From, Until time.Time
	// Tools are the classes and tools with decisions, the most decided
	// first.
	Tools []ToolFatigue
	// Updating: the roll-up is behind by more than a read adds, so the
	// numbers miss some of the latest decisions for a moment.
	Updating bool
}

// ToolKind is what the tool registry says of a tool, for whether its
// calls may be granted (ok false: not known).
type ToolKind func(name string) (effect policy.Effect, authority policy.Authority, ok bool)

// Fatigue reads the approval-fatigue numbers of the FatigueDays UTC days
// up to now's (any user of the workspace, as the /trust page): the
// roll-up's call_days plus the audit rows it has not folded yet, in one
// snapshot; a bounded read however long the history.
func (s *Service) Fatigue(ctx context.Context, p auth.Principal, now time.Time, tools ToolKind) (Fatigue, error) {
	until := utcMidnight(now).AddDate(0, 0, 1)
	out := Fatigue{From: until.AddDate(0, 0, -FatigueDays), Until: until}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Fatigue{}, fmt.Errorf("trust: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if err := q.SetPagePlanning(ctx); err != nil {
		return Fatigue{}, fmt.Errorf("trust: %w", err)
	}
	decided, behind, err := intent.ReadDecided(ctx, q, p.WorkspaceID, out.From, out.Until)
	if err != nil {
		return Fatigue{}, fmt.Errorf("trust: approval fatigue: %w", err)
	}
	out.Updating = behind
	for k, d := range decided {
		f := ToolFatigue{ActionClass: k.Class, Tool: k.Tool, Decisions: d.Decisions, Approvals: d.Decisions - d.Rejections,
			FastApprovals: d.FastApprovals, Rejections: d.Rejections,
			MedianDecision: time.Duration(intent.MedianSeconds(d.Hist) * float64(time.Second)),
			Suggestion:     Suggest(d.Decisions, d.FastApprovals, d.Rejections)}
		f.Ungrantable = "the tool is not known any more"
		if tools != nil {
			if effect, authority, ok := tools(k.Tool); ok {
				f.Ungrantable = policy.Ungrantable(effect, authority, k.Class, s.classes)
			}
		}
		out.Tools = append(out.Tools, f)
	}
	slices.SortFunc(out.Tools, func(a, b ToolFatigue) int {
		return cmp.Or(cmp.Compare(b.Decisions, a.Decisions), cmp.Compare(a.ActionClass, b.ActionClass), cmp.Compare(a.Tool, b.Tool))
	})
	return out, nil
}

func utcMidnight(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
