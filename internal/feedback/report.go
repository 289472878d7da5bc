package feedback

import (
	"encoding/csv"
	"io"
	"sort"
	"time"

	"github.com/google/uuid"
)

// ToolCount is how many items name a tool ("" for none).
type ToolCount struct {
	Tool  string
	Known bool
	Count int
}

// ByTool groups items by tool_called, most first (then by name).
func ByTool(items []Item) []ToolCount {
	idx := map[string]int{}
	var out []ToolCount
	for _, it := range items {
		i, ok := idx[it.ToolCalled]
		if !ok {
			i = len(out)
			idx[it.ToolCalled] = i
			out = append(out, ToolCount{Tool: it.ToolCalled, Known: it.ToolKnown})
		}
		out[i].Count++
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Count != out[b].Count {
			return out[a].Count > out[b].Count
		}
		return out[a].Tool < out[b].Tool
	})
	return out
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

// Weekly counts items per week from since's week to now's, every week
// present (zero included), oldest first.
func Weekly(items []Item, since, now time.Time) []WeekCount {
	first, last := weekStart(since), weekStart(now)
	var out []WeekCount
	for w := first; !w.After(last); w = w.AddDate(0, 0, 7) {
		out = append(out, WeekCount{Start: w})
	}
	for _, it := range items {
		i := int(weekStart(it.CreatedAt).Sub(first).Hours() / (24 * 7))
		if i >= 0 && i < len(out) {
			out[i].Count++
		}
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
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
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
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
