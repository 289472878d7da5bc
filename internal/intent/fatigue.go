package intent

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
)

// FastApproval is how soon after its proposal a person's approval of a
// call, as proposed, counts as a fast approval (proposal_call_facts,
// migration 48, holds the same 5 minutes): ADR-036's "approved within
// 5 min", the sign of approval fatigue.
const FastApproval = 5 * time.Minute

// ClassTool is an action class and a tool.
type ClassTool struct{ Class, Tool string }

// Decided are the calls of one action class and tool that a person
// decided (on a confirm card or an approval packet; never those run by
// the automatic path or under a grant).
type Decided struct {
	// Decisions of which FastApprovals were approved as proposed (no
	// edit) within FastApproval, and Rejections were rejected.
	Decisions, FastApprovals, Rejections int64
	// Hist counts the decisions by how long they took (DecisionBucket).
	Hist []int64
}

// ReadDecided reads, per action class and tool, the calls of a
// workspace's days [from, to) that a person decided, as ReadDays reads
// the days (in a repeatable-read transaction): call_days plus the audit
// rows the roll-up has not folded yet; and whether the roll-up is behind.
func ReadDecided(ctx context.Context, q *db.Queries, ws uuid.UUID, from, to time.Time) (map[ClassTool]Decided, bool, error) {
	from, to = utcDay(from), utcDay(to)
	rows, err := q.CallFatigue(ctx, db.CallFatigueParams{WorkspaceID: ws, FromDay: pgDate(from), ToDay: pgDate(to)})
	if err != nil {
		return nil, false, fmt.Errorf("intent: read decided calls: %w", err)
	}
	out := map[ClassTool]Decided{}
	add := func(k ClassTool, c Counts) {
		d := out[k]
		d.Decisions += c.Decisions
		d.FastApprovals += c.FastApprovals
		d.Rejections += c.Rejections
		for len(d.Hist) < len(c.Hist) {
			d.Hist = append(d.Hist, 0)
		}
		for b, n := range c.Hist {
			d.Hist[b] += n
		}
		out[k] = d
	}
	for _, r := range rows {
		hist := make([]int64, len(r.Hist))
		for b, n := range r.Hist {
			hist[b] = int64(n)
		}
		add(ClassTool{r.ActionClass, r.Tool}, Counts{Decisions: r.Decisions, FastApprovals: r.FastApprovals, Rejections: r.Rejections, Hist: hist})
	}
	t := newTally()
	updating, err := t.tail(ctx, q, ws)
	if err != nil {
		return nil, false, err
	}
	for k, c := range t.days {
		if k.Class != "" && !k.Day.Before(from) && k.Day.Before(to) {
			add(ClassTool{k.Class, k.Tool}, *c)
		}
	}
	for k, d := range out {
		if d.Decisions <= 0 {
			delete(out, k)
		}
	}
	return out, updating, nil
}
