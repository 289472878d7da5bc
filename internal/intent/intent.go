// Package intent is what agents are trying to do, read from their calls'
// rationales: the proposals' and the refused calls' (whose audit rows keep
// them), searchable with PostgreSQL full-text search and counted by action
// class and tool. Admins only.
package intent

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// maxCalls is how many matching calls a search lists (the counts cover all).
const maxCalls = 200

// Query is a search: words in websearch syntax ("" for every call) over
// [Since, Until).
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
}

// Service searches rationales.
type Service struct {
	q *db.Queries
}

// NewService returns the service.
func NewService(pool *pgxpool.Pool) *Service { return &Service{q: db.New(pool)} }

var errAdminsOnly = apperr.Errorf(apperr.EFORBIDDEN, "The intent view is for admins.")

// Search finds the calls whose rationale matches q in the period (admins).
// A zero Until is now; a zero Since is 30 days before Until.
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
	rows, err := s.q.SearchIntent(ctx, db.SearchIntentParams{WorkspaceID: p.WorkspaceID, Since: in.Since, Until: in.Until, Q: in.Q, MaxRows: maxCalls})
	if err != nil {
		return Result{}, fmt.Errorf("intent: search: %w", err)
	}
	groups, err := s.q.IntentGroups(ctx, db.IntentGroupsParams{WorkspaceID: p.WorkspaceID, Since: in.Since, Until: in.Until, Q: in.Q})
	if err != nil {
		return Result{}, fmt.Errorf("intent: count: %w", err)
	}
	warned, err := s.q.CountRationaleWarnings(ctx, db.CountRationaleWarningsParams{WorkspaceID: p.WorkspaceID, Since: in.Since, Until: in.Until})
	if err != nil {
		return Result{}, fmt.Errorf("intent: count warnings: %w", err)
	}
	out := Result{Query: in, Calls: make([]Call, len(rows)), Warned: int(warned)}
	for i, r := range rows {
		out.Calls[i] = Call{ID: r.CallID, Tool: r.Tool, ActionClass: r.ActionClass, Rationale: r.Rationale, Status: r.Status, Edited: r.Edited, CreatedAt: r.CreatedAt}
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, Group{ActionClass: g.ActionClass, Tool: g.Tool, Calls: int(g.Calls), Refused: int(g.Refused), Edited: int(g.Edited)})
		out.Total += int(g.Calls)
	}
	return out, nil
}
