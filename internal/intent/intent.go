// Package intent is what agents are trying to do, read from their calls'
// rationales: the proposals' and the refused calls' (whose audit rows keep
// them), searchable with PostgreSQL full-text search and counted by action
// class and tool. Admins only. The counts of a period come from the calls'
// days (calls.go), which a roll-up keeps, so a search reads a bounded
// number of rows however many calls the workspace has made.
package intent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// maxCalls is how many matching calls a search lists (the counts cover
// every call of the period; with words, every call read).
const maxCalls = 200

// WordScan is how many of a period's latest calls a search with words
// reads, per owner (and as many refused at the gate): full-text matching
// has no order, so a search for words is bounded this way, and its counts
// cover those calls (Result.Capped says when older ones were left unread).
const WordScan = 5000

// Query is a search: words in websearch syntax ("" for every call) over
// [Since, Until), in whole days (UTC): a time is widened to its day.
type Query struct {
	Q            string
	Since, Until time.Time
}

// Call is one call and its rationale.
type Call struct {
	ID          string
	Tool        string
	ActionClass string
	Rationale   string
	// Status is the proposal's, or "refused" for a call refused at the
	// gate (no proposal was recorded).
	Status    string
	Edited    bool
	CreatedAt time.Time
}

// Group counts the matching calls of one action class and tool.
type Group struct {
	ActionClass, Tool string
	Calls             int
	Refused, Edited   int
}

// RefusedShare is the share of the group's calls that were refused (0 to 1).
func (g Group) RefusedShare() float64 { return share(g.Refused, g.Calls) }

// EditedShare is the share that ran with edited arguments (0 to 1).
func (g Group) EditedShare() float64 { return share(g.Edited, g.Calls) }

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Result is a search's answer.
type Result struct {
	Query  Query
	Calls  []Call
	Groups []Group
	// Total is every matching call (Calls lists at most 200).
	Total int
	// Warned counts the calls accepted with a missing or short rationale
	// (warn mode) in the period.
	Warned int
	// Capped: a search for words read only the latest WordScan calls of
	// some owner (or refusals at the gate); its counts cover those.
	Capped bool
	// Updating: the roll-up is behind (ReadDays), so the counts miss
	// some of the latest calls for a moment.
	Updating bool
}

// Service searches rationales, and keeps the calls' days.
type Service struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// mu guards the roll-up's sweep of unfinished calls on this instance:
	// where it goes on from, when it last ran and how often it runs.
	mu         sync.Mutex
	sweepAfter uuid.UUID
	sweptAt    time.Time
	sweepEvery time.Duration
}

// NewService returns the service.
func NewService(pool *pgxpool.Pool) *Service {
	return &Service{pool: pool, q: db.New(pool), sweepEvery: sweepEvery}
}

var errAdminsOnly = apperr.Errorf(apperr.EFORBIDDEN, "The intent view is for admins.")

// Search finds the calls whose rationale matches q in the period (admins).
// A zero Until is now; a zero Since is 30 days before Until. The period is
// widened to whole days (UTC), which the result's Query says.
func (s *Service) Search(ctx context.Context, p auth.Principal, in Query, now time.Time) (Result, error) {
	if !p.IsAdmin() || p.IsAgent() {
		return Result{}, errAdminsOnly
	}
	in.Q = strings.TrimSpace(in.Q)
	if utf8.RuneCountInString(in.Q) > 200 {
		return Result{}, apperr.Invalid("The search is too long.", apperr.FieldError{Field: "q", Message: "must have at most 200 characters"})
	}
	if in.Until.IsZero() {
		in.Until = now
	}
	if in.Since.IsZero() {
		in.Since = in.Until.AddDate(0, 0, -30)
	}
	if !in.Since.Before(in.Until) {
		return Result{}, apperr.Invalid("The period is empty.", apperr.FieldError{Field: "since", Message: "must be before until"})
	}
	in.Since = utcDay(in.Since)
	if until := utcDay(in.Until); until.Before(in.Until) {
		in.Until = until.AddDate(0, 0, 1)
	} else {
		in.Until = until
	}
	// One snapshot: the folded days and the rows after them.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Result{}, fmt.Errorf("intent: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if err := q.SetPagePlanning(ctx); err != nil {
		return Result{}, fmt.Errorf("intent: %w", err)
	}
	days, err := ReadDays(ctx, q, p.WorkspaceID, in.Since, in.Until)
	if err != nil {
		return Result{}, err
	}
	out := Result{Query: in, Updating: days.Updating}
	groups := map[[2]string]*Group{}
	group := func(class, tool string) *Group {
		g := groups[[2]string{class, tool}]
		if g == nil {
			g = &Group{ActionClass: class, Tool: tool}
			groups[[2]string{class, tool}] = g
		}
		return g
	}
	for k, c := range days.Counts {
		out.Warned += int(c.Warned)
		if in.Q == "" && c.Calls > 0 {
			g := group(k.Class, k.Tool)
			g.Calls += int(c.Calls)
			g.Refused += int(c.Refused)
			g.Edited += int(c.Edited)
		}
	}
	if in.Q == "" {
		rows, err := q.IntentCalls(ctx, db.IntentCallsParams{WorkspaceID: p.WorkspaceID, Since: in.Since, Until: in.Until, MaxRows: maxCalls})
		if err != nil {
			return Result{}, fmt.Errorf("intent: search: %w", err)
		}
		for _, r := range rows {
			out.Calls = append(out.Calls, Call{ID: r.CallID, Tool: r.Tool, ActionClass: r.ActionClass, Rationale: r.Rationale, Status: r.Status,
				Edited: r.Edited, CreatedAt: r.CreatedAt})
		}
	} else {
		rows, err := q.IntentWordMatches(ctx, db.IntentWordMatchesParams{WorkspaceID: p.WorkspaceID, Since: in.Since, Until: in.Until, Q: in.Q,
			PerSource: WordScan, Listed: maxCalls})
		if err != nil {
			return Result{}, fmt.Errorf("intent: search: %w", err)
		}
		for _, r := range rows {
			out.Capped = out.Capped || r.Fullest >= WordScan
			if r.CallID == "" {
				continue // nothing matched
			}
			g := group(r.ActionClass, r.Tool)
			g.Calls++
			if r.Refused {
				g.Refused++
			}
			if r.Edited {
				g.Edited++
			}
			if len(out.Calls) < maxCalls {
				out.Calls = append(out.Calls, Call{ID: r.CallID, Tool: r.Tool, ActionClass: r.ActionClass, Rationale: r.Rationale, Status: r.Status,
					Edited: r.Edited, CreatedAt: r.CreatedAt})
			}
		}
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, *g)
		out.Total += g.Calls
	}
	slices.SortFunc(out.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.ActionClass, b.ActionClass), cmp.Compare(a.Tool, b.Tool))
	})
	return out, nil
}
