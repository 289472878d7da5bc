package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/feedback"
	"github.com/gatehouse/gatehouse/views"
)

// feedbackJSON is a feedback item in the API.
type feedbackJSON struct {
	ID              string `json:"id"`
	Status          string `json:"status"`
	Severity        string `json:"severity"`
	SubmittedBy     string `json:"submitted_by"`
	TokenName       string `json:"token_name,omitempty"`
	AttemptedAction string `json:"attempted_action"`
	ExpectedOutcome string `json:"expected_outcome"`
	ActualOutcome   string `json:"actual_outcome"`
	ToolCalled      string `json:"tool_called,omitempty"`
	ToolKnown       bool   `json:"tool_known"`
	ErrorSeen       string `json:"error_seen,omitempty"`
	Rationale       string `json:"rationale"`
	ProposalID      string `json:"proposal_id,omitempty"`
	ApprovalID      string `json:"approval_id,omitempty"`
	AdminNote       string `json:"admin_note,omitempty"`
	CreatedAt       string `json:"created_at"`
	UpdatedAt       string `json:"updated_at"`
}

func toFeedbackJSON(it feedback.Item) feedbackJSON {
	return feedbackJSON{ID: it.ID.String(), Status: it.Status, Severity: it.Severity, SubmittedBy: it.SubmittedBy, TokenName: it.TokenName,
		AttemptedAction: it.AttemptedAction, ExpectedOutcome: it.ExpectedOutcome, ActualOutcome: it.ActualOutcome, ToolCalled: it.ToolCalled,
		ToolKnown: it.ToolKnown, ErrorSeen: it.ErrorSeen, Rationale: it.Rationale, ProposalID: idString(it.ProposalID),
		ApprovalID: idString(it.ApprovalID), AdminNote: it.AdminNote, CreatedAt: rfc3339(it.CreatedAt), UpdatedAt: rfc3339(it.UpdatedAt)}
}

// apiSubmitFeedback handles "POST /api/v1/feedback": an agent (or a user)
// says where it got stuck.
func (s *Server) apiSubmitFeedback(c echo.Context) error {
	var in struct {
		AttemptedAction string `json:"attempted_action"`
		ExpectedOutcome string `json:"expected_outcome"`
		ActualOutcome   string `json:"actual_outcome"`
		ToolCalled      string `json:"tool_called"`
		ErrorSeen       string `json:"error_seen"`
		Severity        string `json:"severity"`
		Rationale       string `json:"rationale"`
		ProposalID      string `json:"proposal_id"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	proposal, err := optionalUUID("proposal_id", in.ProposalID)
	if err != nil {
		return err
	}
	it, err := s.feedback.Submit(c.Request().Context(), principal(c), feedback.Input{AttemptedAction: in.AttemptedAction,
		ExpectedOutcome: in.ExpectedOutcome, ActualOutcome: in.ActualOutcome, ToolCalled: in.ToolCalled, ErrorSeen: in.ErrorSeen,
		Severity: in.Severity, Rationale: in.Rationale, ProposalID: proposal})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toFeedbackJSON(it))
}

// feedbackFilter reads the triage filters; since is a date (2006-01-02)
// or an RFC 3339 time.
func feedbackFilter(q url.Values) (feedback.Filter, error) {
	f := feedback.Filter{Severity: q.Get("severity"), Tool: strings.TrimSpace(q.Get("tool")), Status: q.Get("status")}
	var fields []apperr.FieldError
	if since := strings.TrimSpace(q.Get("since")); since != "" {
		t, err := parseSince(since)
		if err != nil {
			fields = append(fields, apperr.FieldError{Field: "since", Message: "must be a date (2006-01-02) or an RFC 3339 time"})
		}
		f.Since = t
	}
	if f.Severity != "" && !contains(feedback.Severities, f.Severity) {
		fields = append(fields, apperr.FieldError{Field: "severity", Message: "must be low, med or high"})
	}
	if f.Status != "" && !contains(feedback.Statuses, f.Status) {
		fields = append(fields, apperr.FieldError{Field: "status", Message: "must be one of " + strings.Join(feedback.Statuses, ", ")})
	}
	if len(fields) > 0 {
		return f, apperr.Invalid("Invalid filter.", fields...)
	}
	return f, nil
}

func parseSince(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// feedbackPage handles "GET /admin/feedback" (approvers and admins): the
// triage page, or its JSON for Accept: application/json or a bearer token.
func (s *Server) feedbackPage(c echo.Context) error {
	ctx, now := c.Request().Context(), time.Now()
	f, ferr := feedbackFilter(c.QueryParams())
	if ferr != nil && jsonCaller(c) {
		return ferr
	}
	items, err := s.feedback.List(ctx, principal(c), f, now)
	if err != nil {
		return err
	}
	since := f.Since
	if since.IsZero() {
		since = now.AddDate(0, 0, -90)
	}
	weeks := feedback.Weekly(items, since, now)
	groups := feedback.ByTool(items)
	if jsonCaller(c) {
		out := struct {
			Items  []feedbackJSON   `json:"items"`
			ByTool []map[string]any `json:"by_tool"`
			Weekly []map[string]any `json:"weekly"`
		}{Items: []feedbackJSON{}, ByTool: []map[string]any{}, Weekly: []map[string]any{}}
		for _, it := range items {
			out.Items = append(out.Items, toFeedbackJSON(it))
		}
		for _, g := range groups {
			out.ByTool = append(out.ByTool, map[string]any{"tool_called": g.Tool, "tool_known": g.Known, "count": g.Count})
		}
		for _, w := range weeks {
			out.Weekly = append(out.Weekly, map[string]any{"week_start": w.Start.Format("2006-01-02"), "count": w.Count})
		}
		return c.JSON(http.StatusOK, out)
	}
	q := c.QueryParams()
	v := views.FeedbackView{Since: q.Get("since"), Severity: f.Severity, Tool: f.Tool, Status: f.Status,
		Query: url.Values{"since": {q.Get("since")}, "severity": {f.Severity}, "tool": {f.Tool}, "status": {f.Status}}.Encode(),
		Chart: weeklyChart(weeks)}
	status := http.StatusOK
	if ferr != nil {
		v.Error, status = apperr.Message(ferr)+" "+fieldSummary(ferr), http.StatusUnprocessableEntity
	}
	for _, g := range groups {
		v.ByTool = append(v.ByTool, views.FeedbackToolCount{Tool: g.Tool, Known: g.Known, Count: g.Count,
			URL: "/admin/feedback?" + url.Values{"tool": {g.Tool}}.Encode()})
	}
	for _, it := range items {
		v.Items = append(v.Items, toFeedbackItem(it))
	}
	return render(c, status, views.FeedbackPage(s.shell(c, "Feedback", "admin"), v))
}

func fieldSummary(err error) string {
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		return ""
	}
	var parts []string
	for _, f := range ae.Fields {
		parts = append(parts, f.Field+" "+f.Message)
	}
	return strings.Join(parts, "; ")
}

// feedbackProposalURL leads an approver from an item to its proposal: its
// approval packet, or else its decision's receipts.
func feedbackProposalURL(it feedback.Item) string {
	switch {
	case it.ApprovalID != uuid.Nil:
		return "/admin/approvals/" + it.ApprovalID.String()
	case it.ProposalID != uuid.Nil:
		return "/admin/receipts?proposal=" + it.ProposalID.String()
	}
	return ""
}

func toFeedbackItem(it feedback.Item) views.FeedbackItem {
	return views.FeedbackItem{ID: it.ID.String(), Created: it.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), SubmittedBy: it.SubmittedBy,
		TokenName: it.TokenName, AttemptedAction: it.AttemptedAction, ExpectedOutcome: it.ExpectedOutcome, ActualOutcome: it.ActualOutcome,
		ToolCalled: it.ToolCalled, ToolKnown: it.ToolKnown, ErrorSeen: it.ErrorSeen, Severity: it.Severity, Rationale: it.Rationale,
		Status: it.Status, AdminNote: it.AdminNote, ProposalURL: feedbackProposalURL(it), Next: feedback.NextStatuses(it.Status)}
}

// weeklyChart lays the weekly counts out as bars of an SVG chart.
func weeklyChart(weeks []feedback.WeekCount) views.FeedbackChart {
	const height, barW, gap = 120, 16, 4
	ch := views.FeedbackChart{Height: height, Width: max(len(weeks)*(barW+gap), barW)}
	peak, total := 0, 0
	for _, w := range weeks {
		peak, total = max(peak, w.Count), total+w.Count
	}
	for i, w := range weeks {
		h := 0
		if peak > 0 {
			h = w.Count * (height - 10) / peak
		}
		ch.Bars = append(ch.Bars, views.FeedbackBar{X: i * (barW + gap), Y: height - h, W: barW, H: h, Label: w.Start.Format("2006-01-02"), Count: w.Count})
	}
	first, last := "", ""
	if len(weeks) > 0 {
		first, last = weeks[0].Start.Format("2006-01-02"), weeks[len(weeks)-1].Start.Format("2006-01-02")
	}
	ch.Summary = fmt.Sprintf("%d feedback items over %d weeks from the week of %s to the week of %s; at most %d in one week.", total, len(weeks), first, last, peak)
	return ch
}

// feedbackCSV handles "GET /admin/feedback.csv" (approvers and admins):
// the triage list with the same filters, as CSV.
func (s *Server) feedbackCSV(c echo.Context) error {
	f, err := feedbackFilter(c.QueryParams())
	if err != nil {
		return err
	}
	items, err := s.feedback.List(c.Request().Context(), principal(c), f, time.Now())
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="feedback.csv"`)
	c.Response().WriteHeader(http.StatusOK)
	return feedback.WriteCSV(c.Response(), items)
}

// setFeedbackStatus handles "POST /admin/feedback/:id/status" (approvers
// and admins): the htmx form swaps the item's row; JSON callers get the
// item.
func (s *Server) setFeedbackStatus(c echo.Context) error {
	id, err := pathID(c, feedback.ErrNotFound)
	if err != nil {
		return err
	}
	status, note := c.FormValue("status"), c.FormValue("note")
	it, err := s.feedback.SetStatus(c.Request().Context(), principal(c), id, status, note)
	if jsonCaller(c) {
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toFeedbackJSON(it))
	}
	if err != nil {
		if apperr.Code(err) != apperr.EINVALID || !isHTMX(c) {
			return err
		}
		// Re-render the row as it is, with the message.
		cur, gerr := s.feedback.Get(c.Request().Context(), principal(c), id)
		if gerr != nil {
			return gerr
		}
		row := toFeedbackItem(cur)
		row.Error = apperr.Message(err)
		return render(c, http.StatusUnprocessableEntity, views.FeedbackRow(s.shell(c, "", "").CSRF, row))
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/admin/feedback")
	}
	return render(c, http.StatusOK, views.FeedbackRow(s.shell(c, "", "").CSRF, toFeedbackItem(it)))
}
