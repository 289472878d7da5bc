package feedback

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// The triage list is read a page at a time (issue 32), newest first by
// (created_at, id), through the index of the filter's lead (migration 36).
// What bounds each read, however much feedback there is:
//   - a page reads at most PageBudget rows of its index (a narrow filter's
//     page may hold fewer items than asked: Page.Partial) and PageMax+1
//     items;
//   - the counts by tool and per week read at most CountBudget rows of
//     the window, on the index alone (Counts.Capped past it);
//   - the CSV export holds one page of exportPage items at a time.
const (
	PageDefault = 50
	PageMax     = 200
	PageBudget  = 1000
	CountBudget = 5000
	exportPage  = 500
)

// PageRequest says which page to read: Cursor is the Next of the page
// before ("" for the first page), Limit how many items (1 to PageMax).
type PageRequest struct {
	Cursor string
	Limit  int
}

// Page is one page of the triage list, newest first.
type Page struct {
	Items []Item
	// Next is the cursor of the page after this one (older items); "" on
	// the last page.
	Next string
	// Partial says the page read its budget of rows before it filled:
	// fewer items matched than asked, and more may match after Next.
	Partial bool
}

// lead is the filter whose index a read goes through: a tool (the
// narrowest, and the by-tool table's links), then a status (the triage
// queue), then a severity; the other filters are checked on that index's
// included columns.
func lead(f Filter) string {
	switch {
	case f.Tool != "":
		return "tool"
	case f.Status != "":
		return "status"
	case f.Severity != "":
		return "severity"
	}
	return ""
}

// Page returns one page of the workspace's feedback under the filter
// (approvers and admins), from the request's cursor. The caller's rights
// come first; then a bad filter, a limit out of range, or a cursor that
// was altered or belongs to another filter or user is EINVALID naming the
// parameter, and nothing is read.
func (s *Service) Page(ctx context.Context, p auth.Principal, f Filter, req PageRequest, now time.Time) (Page, error) {
	if err := triager(p); err != nil {
		return Page{}, err
	}
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	if req.Limit < 1 || req.Limit > PageMax {
		return Page{}, apperr.Invalid(fmt.Sprintf("The limit must be a number from 1 to %d.", PageMax),
			apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be from 1 to %d", PageMax)})
	}
	key, err := s.key.Get(ctx)
	if err != nil {
		return Page{}, err
	}
	cur := newPageCursors(key, p, f)
	pos := start
	if req.Cursor != "" {
		var ok bool
		if pos, ok = cur.decode(req.Cursor); !ok {
			return Page{}, ErrCursor
		}
	}
	r, err := s.read(ctx, p.WorkspaceID, f, f.since(now), pos, req.Limit)
	if err != nil {
		return Page{}, err
	}
	page := Page{Items: r.items, Partial: r.partial}
	if r.more {
		page.Next = cur.encode(r.next)
	}
	return page, nil
}

// readPage is what one read of the list found.
type readPage struct {
	items   []Item
	next    position // where the next page starts, when more
	more    bool
	partial bool
}

// read reads up to limit items of the filter's list older than pos.
func (s *Service) read(ctx context.Context, workspace uuid.UUID, f Filter, since time.Time, pos position, limit int) (readPage, error) {
	rows, err := s.q.ListFeedbackPage(ctx, db.ListFeedbackPageParams{Budget: PageBudget, PageLimit: int32(limit + 1),
		WorkspaceID: workspace, Lead: lead(f), Since: since, BeforeAt: pos.At, BeforeID: pos.ID,
		Severity: f.Severity, Status: f.Status, Tool: f.Tool})
	if err != nil {
		return readPage{}, fmt.Errorf("feedback: list: %w", err)
	}
	var r readPage
	matched := 0
	for _, row := range rows {
		if !row.Matched {
			continue
		}
		matched++
		if len(r.items) < limit {
			r.items = append(r.items, fromRow(row.Feedback, row.ApprovalID))
			r.next = position{At: row.Feedback.CreatedAt, ID: row.Feedback.ID}
		}
	}
	switch n := len(rows); {
	case matched > limit:
		r.more = true // after the last item shown
	case n > 0 && rows[n-1].LastRead:
		// The read stopped at its budget: the next page starts after the
		// last row read, matched or not.
		last := rows[n-1].Feedback
		r.next, r.more, r.partial = position{At: last.CreatedAt, ID: last.ID}, true, len(r.items) < limit
	}
	return r, nil
}

// Counts are the triage page's counts under a filter.
type Counts struct {
	ByTool []ToolCount
	Weekly []WeekCount
	// Since is where the counts begin: the filter's window, or, when they
	// stopped at CountBudget rows (Capped), the oldest item read.
	Since  time.Time
	Capped bool
}

// Counts counts the filter's items by tool and per week (approvers and
// admins), in one query that reads at most CountBudget rows of the window
// (newest first) on its index alone: exact up to that many items, and
// past it exact from Counts.Since on.
func (s *Service) Counts(ctx context.Context, p auth.Principal, f Filter, now time.Time) (Counts, error) {
	if err := triager(p); err != nil {
		return Counts{}, err
	}
	if err := f.Validate(); err != nil {
		return Counts{}, err
	}
	c := Counts{Since: f.since(now)}
	rows, err := s.q.CountFeedback(ctx, db.CountFeedbackParams{Lead: lead(f), WorkspaceID: p.WorkspaceID, Since: c.Since,
		Budget: CountBudget, Severity: f.Severity, Status: f.Status, Tool: f.Tool})
	if err != nil {
		return Counts{}, fmt.Errorf("feedback: count: %w", err)
	}
	weeks := map[time.Time]int{}
	for _, r := range rows {
		switch r.Kind {
		case "tool":
			c.ByTool = append(c.ByTool, ToolCount{Tool: r.ToolCalled, Known: r.ToolKnown, Count: int(r.Items)})
		case "week":
			weeks[r.Week.UTC()] = int(r.Items)
		case "total":
			if r.Read >= CountBudget {
				c.Capped, c.Since = true, r.Oldest
			}
		}
	}
	sort.Slice(c.ByTool, func(a, b int) bool {
		if c.ByTool[a].Count != c.ByTool[b].Count {
			return c.ByTool[a].Count > c.ByTool[b].Count
		}
		return c.ByTool[a].Tool < c.ByTool[b].Tool
	})
	c.Weekly = fillWeeks(weeks, c.Since, now)
	return c, nil
}

// Export is the filter's whole list as CSV, read a page at a time.
type Export struct {
	s         *Service
	workspace uuid.UUID
	f         Filter
	since     time.Time
	first     readPage
}

// Export checks the caller's rights and the filter and reads the first
// page, so that whatever fails before the first byte is sent can still be
// answered with its status; WriteCSV writes the rest.
func (s *Service) Export(ctx context.Context, p auth.Principal, f Filter, now time.Time) (*Export, error) {
	if err := triager(p); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	e := &Export{s: s, workspace: p.WorkspaceID, f: f, since: f.since(now)}
	var err error
	if e.first, err = s.read(ctx, e.workspace, f, e.since, start, exportPage); err != nil {
		return nil, err
	}
	return e, nil
}

// WriteCSV writes every item of the export, newest first, a page at a
// time (flushing w after each when it can), each cell guarded against
// formula injection.
func (e *Export) WriteCSV(ctx context.Context, w io.Writer) error {
	cw := newCSVWriter(w)
	if err := cw.header(); err != nil {
		return err
	}
	r := e.first
	for {
		if err := cw.items(r.items); err != nil {
			return err
		}
		if fl, ok := w.(interface{ Flush() }); ok {
			fl.Flush()
		}
		if !r.more {
			return nil
		}
		var err error
		if r, err = e.s.read(ctx, e.workspace, e.f, e.since, r.next, exportPage); err != nil {
			return err
		}
	}
}
