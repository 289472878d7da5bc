package intent

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

// The calls' days: call_days counts each UTC day's calls of a workspace
// per action class and tool (how many, refused, edited, warned about their
// rationale, decided by a person and how long that took, and of those
// the approvals as proposed within 5 minutes and the rejections: the
// approval-fatigue numbers, fatigue.go), folded from the
// audit log by the roll-up (internal/rollup). A page reads the days it
// shows plus the audit rows the roll-up has not folded yet (ReadDays).
//
// The audit log is the calls' feed: every call writes its
// proposal.created (or, refused at the gate, its proposal.refused) row
// with its proposal, and every later change of a call an audit row naming
// the call or its approval packet. A call is counted as it is when its
// proposal.created row is folded; while it is not finished (pending,
// waiting for an approver, applying) call_days_open remembers what was
// counted, and each later audit row about it (or the sweep, for a change
// no audit row names) adds the difference.

// FeedName is the audit log's feed.
const FeedName = "audit_events"

// TailCap is how many audit rows after the watermark a page reads at
// most; past it the page says it is updating (the roll-up is behind).
const TailCap = 20000

// foldBatch is how many audit rows the roll-up folds in one transaction;
// sweepBatch how many unfinished calls its sweep checks, once a
// sweepEvery.
const (
	foldBatch  = 5000
	sweepBatch = 500
	sweepEvery = time.Second
)

// DayKey is one row of call_days.
type DayKey struct {
	Workspace uuid.UUID
	// Day is midnight UTC.
	Day         time.Time
	Class, Tool string
}

// Counts are a day's counts of one action class and tool.
type Counts struct {
	Calls, Refused, Edited, Warned, Decisions int64
	// FastApprovals of Decisions were approved as proposed (no edit)
	// within FastApproval of the proposal; Rejections were rejected.
	FastApprovals, Rejections int64
	// Hist counts decisions by how long they took: Hist[b] those of
	// bucket b (DecisionBucket).
	Hist []int64
}

func (c *Counts) add(o Counts, sign int64) {
	c.Calls += sign * o.Calls
	c.Refused += sign * o.Refused
	c.Edited += sign * o.Edited
	c.Warned += sign * o.Warned
	c.Decisions += sign * o.Decisions
	c.FastApprovals += sign * o.FastApprovals
	c.Rejections += sign * o.Rejections
	for len(c.Hist) < len(o.Hist) {
		c.Hist = append(c.Hist, 0)
	}
	for i, n := range o.Hist {
		c.Hist[i] += sign * n
	}
}

func (c Counts) zero() bool {
	return c.Calls == 0 && c.Refused == 0 && c.Edited == 0 && c.Warned == 0 && c.Decisions == 0 && c.FastApprovals == 0 && c.Rejections == 0 &&
		!slices.ContainsFunc(c.Hist, func(n int64) bool { return n != 0 })
}

// DecisionBucket is the seconds bucket b of the SQL function
// gatehouse_decision_bucket holds, [lo, hi): bucket 0 is under a second,
// bucket b >= 1 is [2^((b-1)/4), 2^(b/4)).
func DecisionBucket(b int) (lo, hi float64) {
	if b <= 0 {
		return 0, 1
	}
	return math.Exp2(float64(b-1) / 4), math.Exp2(float64(b) / 4)
}

// MedianSeconds is the median of a histogram of decisions, as
// percentile_cont(0.5) gives it (the middle decision, or the mean of the
// middle two), each decision placed within its bucket (geometrically: the
// buckets are log-scale, each about 19 % wide). 0 for no decisions.
func MedianSeconds(hist []int64) float64 {
	var n int64
	for _, c := range hist {
		n += max(c, 0)
	}
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return rankSeconds(hist, (n+1)/2)
	}
	return (rankSeconds(hist, n/2) + rankSeconds(hist, n/2+1)) / 2
}

// rankSeconds is the r-th shortest decision (from 1), placed evenly among
// its bucket's.
func rankSeconds(hist []int64, r int64) float64 {
	var seen int64
	for b, c := range hist {
		if c <= 0 {
			continue
		}
		if seen+c >= r {
			f := (float64(r-seen) - 0.5) / float64(c)
			lo, hi := DecisionBucket(b)
			if b == 0 {
				return lo + f*(hi-lo)
			}
			return lo * math.Pow(hi/lo, f)
		}
		seen += c
	}
	lo, _ := DecisionBucket(len(hist) - 1)
	return lo
}

// callFacts are what a call counts for.
type callFacts struct {
	key                      DayKey
	refused, edited, decided bool
	bucket                   int
	// fast: decided, approved as proposed within FastApproval; rejected:
	// decided, rejected (proposal_call_facts, migration 48).
	fast, rejected bool
}

func (f callFacts) counts() Counts {
	c := Counts{Calls: 1}
	if f.refused {
		c.Refused = 1
	}
	if f.edited {
		c.Edited = 1
	}
	if f.decided {
		c.Decisions = 1
		c.Hist = make([]int64, f.bucket+1)
		c.Hist[f.bucket] = 1
		if f.fast {
			c.FastApprovals = 1
		}
		if f.rejected {
			c.Rejections = 1
		}
	}
	return c
}

// callEvent is an audit row that changes a count, with the call it is
// about as it is now (nil: none, or it was deleted) and as call_days_open
// counted it (nil: not there).
type callEvent struct {
	workspace           uuid.UUID
	action              string
	at                  time.Time
	dataClass, dataTool string
	warning             bool
	proposal            uuid.UUID
	now                 *callFacts
	open                bool // now is not finished
	counted             *callFacts
}

// tally adds events up: the counts they change per day, and the calls
// whose counted facts changed (nil: forget the call, it is finished).
type tally struct {
	days map[DayKey]*Counts
	open map[uuid.UUID]*callFacts
}

func newTally() *tally {
	return &tally{days: map[DayKey]*Counts{}, open: map[uuid.UUID]*callFacts{}}
}

func (t *tally) add(k DayKey, c Counts, sign int64) {
	d := t.days[k]
	if d == nil {
		d = &Counts{}
		t.days[k] = d
	}
	d.add(c, sign)
}

// counted is what was counted for the event's call: as this tally left
// it, else as call_days_open had it.
func (t *tally) counted(ev callEvent) *callFacts {
	if f, ok := t.open[ev.proposal]; ok {
		return f
	}
	return ev.counted
}

// apply adds one event.
func (t *tally) apply(ev callEvent) {
	switch ev.action {
	case "proposal.refused": // refused at the gate: no proposal
		k := DayKey{Workspace: ev.workspace, Day: utcDay(ev.at), Class: ev.dataClass, Tool: ev.dataTool}
		c := Counts{Calls: 1, Refused: 1}
		if ev.warning {
			c.Warned = 1
		}
		t.add(k, c, 1)
		return
	case "proposal.created":
		if ev.warning {
			k := DayKey{Workspace: ev.workspace, Day: utcDay(ev.at), Class: ev.dataClass, Tool: ev.dataTool}
			if ev.now != nil {
				k.Class, k.Tool = ev.now.key.Class, ev.now.key.Tool
			}
			t.add(k, Counts{Warned: 1}, 1)
		}
	default: // a change of a call counted as not finished
		if t.counted(ev) == nil {
			return
		}
	}
	prev := t.counted(ev)
	if ev.now == nil { // deleted by hand: stop following it
		if prev != nil {
			t.open[ev.proposal] = nil
		}
		return
	}
	if prev != nil {
		t.add(prev.key, prev.counts(), -1)
	}
	t.add(ev.now.key, ev.now.counts(), 1)
	if ev.open {
		now := *ev.now
		t.open[ev.proposal] = &now
	} else if prev != nil { // finished: nothing more will change
		t.open[ev.proposal] = nil
	}
}

func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func dayOf(d pgtype.Date) time.Time {
	return time.Date(d.Time.Year(), d.Time.Month(), d.Time.Day(), 0, 0, 0, 0, time.UTC)
}

func pgDate(t time.Time) pgtype.Date { return pgtype.Date{Time: utcDay(t), Valid: true} }

func eventOf(r db.CallEventsRow) callEvent {
	ev := callEvent{workspace: r.WorkspaceID, action: r.Action, at: r.CreatedAt, dataClass: r.DataClass, dataTool: r.DataTool, warning: r.Warning,
		proposal: r.ProposalID, open: r.Open}
	if r.Found {
		ev.now = &callFacts{key: DayKey{Workspace: r.WorkspaceID, Day: dayOf(r.Day), Class: r.ActionClass, Tool: r.Tool},
			refused: r.Refused, edited: r.Edited, decided: r.Decided, bucket: int(r.DecisionBucket), fast: r.FastApproval, rejected: r.Rejected}
	}
	if r.Counted {
		ev.counted = &callFacts{key: DayKey{Workspace: r.WorkspaceID, Day: dayOf(r.CountedDay), Class: r.CountedClass, Tool: r.CountedTool},
			refused: r.CountedRefused, edited: r.CountedEdited, decided: r.CountedDecided, bucket: int(r.CountedBucket),
			fast: r.CountedFastApproval, rejected: r.CountedRejected}
	}
	return ev
}

// Days are a workspace's calls of some days.
type Days struct {
	// Counts have no histogram (ReadDecisions reads them).
	Counts map[DayKey]Counts
	// Updating: the roll-up is behind by more than TailCap audit rows,
	// and the counts miss what it has not folded beyond them.
	Updating bool
}

// ReadDays reads a workspace's calls of the days [from, to) (times are
// taken to their UTC day): call_days plus the audit rows the roll-up has
// not folded yet. Run it in a repeatable-read transaction, so that both
// are read in one snapshot.
func ReadDays(ctx context.Context, q *db.Queries, ws uuid.UUID, from, to time.Time) (Days, error) {
	from, to = utcDay(from), utcDay(to)
	rows, err := q.CallDays(ctx, db.CallDaysParams{WorkspaceID: ws, FromDay: pgDate(from), ToDay: pgDate(to)})
	if err != nil {
		return Days{}, fmt.Errorf("intent: read days: %w", err)
	}
	t := newTally()
	for _, r := range rows {
		t.add(DayKey{Workspace: ws, Day: dayOf(r.Day), Class: r.ActionClass, Tool: r.Tool},
			Counts{Calls: r.Calls, Refused: r.Refused, Edited: r.Edited, Warned: r.Warned, Decisions: r.Decisions,
				FastApprovals: r.FastApprovals, Rejections: r.Rejections}, 1)
	}
	updating, err := t.tail(ctx, q, ws)
	if err != nil {
		return Days{}, err
	}
	out := Days{Counts: map[DayKey]Counts{}, Updating: updating}
	for k, c := range t.days {
		if !k.Day.Before(from) && k.Day.Before(to) {
			c.Hist = nil
			if !c.zero() {
				out.Counts[k] = *c
			}
		}
	}
	return out, nil
}

// Decisions are a class's calls decided by a person.
type Decisions struct {
	Count int64
	// Hist counts them by how long they took (DecisionBucket).
	Hist []int64
}

// ReadDecisions reads, per action class, the calls of a workspace's days
// [from, to) that a person decided, as ReadDays reads the days (in a
// repeatable-read transaction); and whether the roll-up is behind.
func ReadDecisions(ctx context.Context, q *db.Queries, ws uuid.UUID, from, to time.Time) (map[string]Decisions, bool, error) {
	from, to = utcDay(from), utcDay(to)
	rows, err := q.CallDecisions(ctx, db.CallDecisionsParams{WorkspaceID: ws, FromDay: pgDate(from), ToDay: pgDate(to)})
	if err != nil {
		return nil, false, fmt.Errorf("intent: read decisions: %w", err)
	}
	out := map[string]Decisions{}
	add := func(class string, hist []int64) {
		d := out[class]
		for len(d.Hist) < len(hist) {
			d.Hist = append(d.Hist, 0)
		}
		for b, n := range hist {
			d.Hist[b] += n
			d.Count += n
		}
		out[class] = d
	}
	for _, r := range rows {
		hist := make([]int64, r.Bucket+1)
		hist[r.Bucket] = r.Decisions
		add(r.ActionClass, hist)
	}
	t := newTally()
	updating, err := t.tail(ctx, q, ws)
	if err != nil {
		return nil, false, err
	}
	for k, c := range t.days {
		if k.Class != "" && !k.Day.Before(from) && k.Day.Before(to) {
			add(k.Class, c.Hist)
		}
	}
	for class, d := range out {
		if d.Count == 0 {
			delete(out, class)
		}
	}
	return out, updating, nil
}

// tail applies the workspace's audit rows the roll-up has not folded yet
// (TailCap of them at most: updating says there were more).
func (t *tally) tail(ctx context.Context, q *db.Queries, ws uuid.UUID) (updating bool, err error) {
	feed, err := q.GetRollupFeed(ctx, FeedName)
	if err != nil {
		return false, fmt.Errorf("intent: read the watermark: %w", err)
	}
	end, err := q.AuditBatchEnd(ctx, db.AuditBatchEndParams{After: feed.FoldedTo, Upto: math.MaxInt64, WorkspaceID: uuid.NullUUID{UUID: ws, Valid: true},
		MaxRows: TailCap})
	if err != nil {
		return false, fmt.Errorf("intent: read the tail: %w", err)
	}
	events, err := q.CallEvents(ctx, db.CallEventsParams{After: feed.FoldedTo, Upto: end, WorkspaceID: uuid.NullUUID{UUID: ws, Valid: true}})
	if err != nil {
		return false, fmt.Errorf("intent: read the tail: %w", err)
	}
	for _, r := range events {
		t.apply(eventOf(r))
	}
	return end != math.MaxInt64, nil
}

// write stores what a tally changed: its days' counts (added to
// call_days) and its unfinished calls.
func (t *tally) write(ctx context.Context, q *db.Queries) error {
	keys := slices.SortedFunc(maps.Keys(t.days), func(a, b DayKey) int {
		return cmp.Or(slices.Compare(a.Workspace[:], b.Workspace[:]), a.Day.Compare(b.Day), cmp.Compare(a.Class, b.Class), cmp.Compare(a.Tool, b.Tool))
	})
	var add db.AddCallDaysParams
	for _, k := range keys {
		c := t.days[k]
		if c.zero() {
			continue
		}
		hist := make([]string, len(c.Hist))
		for i, n := range c.Hist {
			hist[i] = strconv.FormatInt(n, 10)
		}
		add.WorkspaceIds = append(add.WorkspaceIds, k.Workspace)
		add.Days = append(add.Days, pgDate(k.Day))
		add.Classes = append(add.Classes, k.Class)
		add.Tools = append(add.Tools, k.Tool)
		add.Calls = append(add.Calls, c.Calls)
		add.Refused = append(add.Refused, c.Refused)
		add.Edited = append(add.Edited, c.Edited)
		add.Warned = append(add.Warned, c.Warned)
		add.Decisions = append(add.Decisions, c.Decisions)
		add.Hists = append(add.Hists, "{"+strings.Join(hist, ",")+"}")
		add.FastApprovals = append(add.FastApprovals, c.FastApprovals)
		add.Rejections = append(add.Rejections, c.Rejections)
	}
	if len(add.Days) > 0 {
		if err := q.AddCallDays(ctx, add); err != nil {
			return fmt.Errorf("add to the days: %w", err)
		}
	}
	var put db.PutOpenCallsParams
	var forget []uuid.UUID
	for id, f := range t.open {
		if f == nil {
			forget = append(forget, id)
			continue
		}
		put.ProposalIds = append(put.ProposalIds, id)
		put.WorkspaceIds = append(put.WorkspaceIds, f.key.Workspace)
		put.Days = append(put.Days, pgDate(f.key.Day))
		put.Classes = append(put.Classes, f.key.Class)
		put.Tools = append(put.Tools, f.key.Tool)
		put.Refused = append(put.Refused, f.refused)
		put.Edited = append(put.Edited, f.edited)
		put.Decided = append(put.Decided, f.decided)
		put.Buckets = append(put.Buckets, int32(f.bucket))
		put.FastApprovals = append(put.FastApprovals, f.fast)
		put.Rejected = append(put.Rejected, f.rejected)
	}
	if len(put.ProposalIds) > 0 {
		if err := q.PutOpenCalls(ctx, put); err != nil {
			return fmt.Errorf("remember unfinished calls: %w", err)
		}
	}
	if len(forget) > 0 {
		if err := q.DeleteOpenCalls(ctx, forget); err != nil {
			return fmt.Errorf("forget finished calls: %w", err)
		}
	}
	return nil
}

// foldCalls folds the audit rows in (after, upto], batch rows at most.
func foldCalls(ctx context.Context, q *db.Queries, after, upto int64, batch int32) (int64, error) {
	end, err := q.AuditBatchEnd(ctx, db.AuditBatchEndParams{After: after, Upto: upto, MaxRows: batch})
	if err != nil {
		return 0, err
	}
	events, err := q.CallEvents(ctx, db.CallEventsParams{After: after, Upto: end})
	if err != nil {
		return 0, err
	}
	t := newTally()
	for _, r := range events {
		t.apply(eventOf(r))
	}
	return end, t.write(ctx, q)
}

// sweep checks a page of the calls counted as unfinished against their
// proposals, for a change no audit row named (or a call deleted by hand).
func (s *Service) sweep(ctx context.Context, q *db.Queries) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.sweptAt) < s.sweepEvery {
		return nil
	}
	s.sweptAt = time.Now()
	rows, err := q.OpenCallsAfter(ctx, db.OpenCallsAfterParams{After: s.sweepAfter, MaxRows: sweepBatch})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if len(rows) < sweepBatch {
		s.sweepAfter = uuid.Nil
	} else {
		s.sweepAfter = rows[len(rows)-1].ProposalID
	}
	t := newTally()
	for _, r := range rows {
		counted := &callFacts{key: DayKey{Workspace: r.WorkspaceID, Day: dayOf(r.Day), Class: r.ActionClass, Tool: r.Tool},
			refused: r.Refused, edited: r.Edited, decided: r.Decided, bucket: int(r.DecisionBucket), fast: r.FastApproval, rejected: r.Rejected}
		ev := callEvent{workspace: r.WorkspaceID, action: "sweep", proposal: r.ProposalID, counted: counted, open: r.NowOpen}
		if r.Found {
			now := *counted
			now.refused, now.edited, now.decided, now.bucket = r.NowRefused, r.NowEdited, r.NowDecided, int(r.NowBucket)
			now.fast, now.rejected = r.NowFastApproval, r.NowRejected
			if now == *counted && r.NowOpen {
				continue // unchanged
			}
			ev.now = &now
		}
		t.apply(ev)
	}
	return t.write(ctx, q)
}

// feed is the audit log's roll-up, folding batch rows per transaction.
func (s *Service) feed(batch int32) rollup.Feed {
	return rollup.Feed{Name: FeedName, GenericPlans: true,
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.AuditHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
			return foldCalls(ctx, q, after, upto, batch)
		},
		Also: s.sweep,
	}
}

// RollUp takes a turn of the calls' roll-up (on every instance: one at a
// time folds).
func (s *Service) RollUp(ctx context.Context) (rollup.Progress, error) {
	return rollup.Advance(ctx, s.pool, s.feed(foldBatch))
}
