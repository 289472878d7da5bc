package trust_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/internal/trust"
)

// The suggestion rule at its edges: a sample of at least 10 decisions,
// fast approvals more than half, rejections 30 % or more, and tighten
// winning when both hold.
func TestSuggest_RuleAtItsEdges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                      string
		decisions, fast, rejected int64
		want                      trust.Suggestion
	}{
		{"no decisions", 0, 0, 0, trust.SuggestNothing},
		{"nine, all fast", 9, 9, 0, trust.SuggestNothing},
		{"nine, all rejected", 9, 0, 9, trust.SuggestNothing},
		{"ten, half fast", 10, 5, 0, trust.SuggestNothing},
		{"ten, six fast", 10, 6, 0, trust.SuggestLessReview},
		{"ten, two rejected, eight fast", 10, 8, 2, trust.SuggestLessReview},
		{"ten, three rejected", 10, 0, 3, trust.SuggestTighten},
		{"ten, six fast and four rejected", 10, 6, 4, trust.SuggestTighten},
		{"a thousand, 29.9 % rejected", 1000, 100, 299, trust.SuggestNothing},
		{"a thousand, 50.1 % fast", 1000, 501, 0, trust.SuggestLessReview},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := trust.Suggest(c.decisions, c.fast, c.rejected); got != c.want {
				t.Errorf("Suggest(%d, %d, %d) = %q, want %q", c.decisions, c.fast, c.rejected, got, c.want)
			}
		})
	}
}

func TestToolFatigue_Shares(t *testing.T) {
	t.Parallel()
	f := trust.ToolFatigue{Decisions: 8, FastApprovals: 6, Rejections: 2}
	if f.FastShare() != 0.75 || f.RejectedShare() != 0.25 || (trust.ToolFatigue{}).FastShare() != 0 {
		t.Errorf("shares: %v %v", f.FastShare(), f.RejectedShare())
	}
}
