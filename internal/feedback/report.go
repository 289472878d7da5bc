package feedback

import (
	"encoding/csv"
	"io"
	"time"

	"github.com/google/uuid"
)

// ToolCount is how many items name a tool ("" for none).
type ToolCount struct {
	Tool  string
	Known bool
	Count int
}

// WeekCount is how many items were submitted in the week starting Start
// (a Monday, UTC).
type WeekCount struct {
	Start time.Time
	Count int
}

// weekStart is the Monday 00:00 UTC of t's week.
func weekStart(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
}

// MaxChartWeeks is how many weeks the weekly chart shows at most (the
// latest), whatever since asks for.
const MaxChartWeeks = 104

// fillWeeks lays counts per week (keyed by their Monday) out from since's
// week to now's, every week present (zero included), oldest first; at
// most the latest MaxChartWeeks.
func fillWeeks(counts map[time.Time]int, since, now time.Time) []WeekCount {
	first, last := weekStart(since), weekStart(now)
	if earliest := last.AddDate(0, 0, -7*(MaxChartWeeks-1)); first.Before(earliest) {
		first = earliest
	}
	var out []WeekCount
	for w := first; !w.After(last); w = w.AddDate(0, 0, 7) {
		out = append(out, WeekCount{Start: w, Count: counts[w]})
	}
	return out
}

// csvSafe keeps a spreadsheet from reading a cell as a formula: a cell
// that starts with = + - @ (or a tab or carriage return, which some
// spreadsheets skip before one) gets a leading quote.
func csvSafe(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// CSVHeader is the first row of the CSV export.
var CSVHeader = []string{"id", "created_at", "status", "severity", "submitted_by", "token_name", "tool_called", "tool_known",
	"attempted_action", "expected_outcome", "actual_outcome", "error_seen", "rationale", "proposal_id", "admin_note"}

// WriteCSV writes items as CSV (RFC 4180, a header row first), every cell
// guarded against formula injection.
func WriteCSV(w io.Writer, items []Item) error {
	cw := newCSVWriter(w)
	if err := cw.header(); err != nil {
		return err
	}
	return cw.items(items)
}

// csvWriter writes the export's rows, flushed after each batch.
type csvWriter struct{ w *csv.Writer }

func newCSVWriter(w io.Writer) csvWriter { return csvWriter{csv.NewWriter(w)} }

func (c csvWriter) header() error {
	if err := c.w.Write(CSVHeader); err != nil {
		return err
	}
	c.w.Flush()
	return c.w.Error()
}

func (c csvWriter) items(items []Item) error {
	for _, it := range items {
		proposal := ""
		if it.ProposalID != uuid.Nil {
			proposal = it.ProposalID.String()
		}
		known := "true"
		if !it.ToolKnown {
			known = "false"
		}
		rec := []string{it.ID.String(), it.CreatedAt.UTC().Format(time.RFC3339), it.Status, it.Severity, it.SubmittedBy, it.TokenName,
			it.ToolCalled, known, it.AttemptedAction, it.ExpectedOutcome, it.ActualOutcome, it.ErrorSeen, it.Rationale, proposal, it.AdminNote}
		for i := range rec {
			rec[i] = csvSafe(rec[i])
		}
		if err := c.w.Write(rec); err != nil {
			return err
		}
	}
	c.w.Flush()
	return c.w.Error()
}
