package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
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
// or an RFC 3339 time. A value that cannot be read is left out of the
// filter (the rest still applies) and named in the error.
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
	var ae *apperr.Error
	if err := f.Validate(); errors.As(err, &ae) {
		for _, fe := range ae.Fields {
			switch fe.Field {
			case "severity":
				f.Severity = ""
			case "status":
				f.Status = ""
			}
		}
		fields = append(fields, ae.Fields...)
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

// feedbackPageFrom is the page a request asks for: ?cursor= (the
// next_cursor of the page before; none for the first page) and ?limit= (1
// to 200, default 50). A limit that is not a number is passed on as out
// of range, so the service refuses it after checking the caller's rights.
func feedbackPageFrom(q url.Values) feedback.PageRequest {
	req := feedback.PageRequest{Cursor: q.Get("cursor"), Limit: feedback.PageDefault}
	if raw, set := q["limit"]; set {
		n, err := strconv.Atoi(strings.TrimSpace(raw[0]))
		if err != nil {
			n = -1
		}
		req.Limit = n
	}
	return req
}

// feedbackQuery is the filter (and the page) as the triage page's links
// carry them: since as it was asked when it could be read, and the limit
// when it is not the default.
func feedbackQuery(f feedback.Filter, since string, req feedback.PageRequest) string {
	q := url.Values{}
	for k, v := range map[string]string{"severity": f.Severity, "tool": f.Tool, "status": f.Status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", since)
	}
	if req.Cursor != "" {
		q.Set("cursor", req.Cursor)
	}
	if req.Limit != feedback.PageDefault {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	return q.Encode()
}

// feedbackPage handles "GET /admin/feedback" (approvers and admins): the
// triage page, or its JSON for Accept: application/json or a bearer token,
// a page at a time (?cursor=, ?limit=), with the counts of the filter.
func (s *Server) feedbackPage(c echo.Context) error {
	ctx, p, now, q := c.Request().Context(), principal(c), time.Now(), c.QueryParams()
	f, ferr := feedbackFilter(q)
	req := feedbackPageFrom(q)
	if jsonCaller(c) {
		if ferr != nil {
			// The caller's rights first: a member learns nothing of the filter.
			if err := feedback.MayTriage(p); err != nil {
				return err
			}
			return ferr
		}
		page, err := s.feedback.Page(ctx, p, f, req, now)
		if err != nil {
			return err
		}
		counts, err := s.feedback.Counts(ctx, p, f, now)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toFeedbackPageJSON(page, counts))
	}
	since := strings.TrimSpace(q.Get("since"))
	v := views.FeedbackView{Severity: f.Severity, Tool: f.Tool, Status: f.Status}
	if !f.Since.IsZero() {
		v.Since = since
	}
	status := http.StatusOK
	if ferr != nil {
		v.Error, status = apperr.Message(ferr)+" "+fieldSummary(ferr), http.StatusUnprocessableEntity
	}
	page, err := s.feedback.Page(ctx, p, f, req, now)
	if isPageError(err) {
		// A page link that cannot be read: the first page, with the
		// message next to the filters.
		v.Error = strings.TrimSpace(v.Error + " " + apperr.Message(err))
		status = http.StatusUnprocessableEntity
		req = feedback.PageRequest{Limit: feedback.PageDefault}
		page, err = s.feedback.Page(ctx, p, f, req, now)
	}
	if err != nil {
		return err
	}
	counts, err := s.feedback.Counts(ctx, p, f, now)
	if err != nil {
		return err
	}
	v.Query = feedbackQuery(f, since, feedback.PageRequest{Limit: feedback.PageDefault})
	if page.Next != "" {
		v.NextURL = "/admin/feedback?" + feedbackQuery(f, since, feedback.PageRequest{Cursor: page.Next, Limit: req.Limit})
	}
	if req.Cursor != "" {
		v.FirstURL = "/admin/feedback?" + feedbackQuery(f, since, feedback.PageRequest{Limit: req.Limit})
	}
	if page.Partial {
		v.PageNote = fmt.Sprintf("This page read %d items and %s this filter; “Older” reads on from there.",
			feedback.PageBudget, feedbackMatchWords(len(page.Items)))
	}
	v.Chart = weeklyChart(counts.Weekly)
	if counts.Capped {
		v.CountsNote = fmt.Sprintf("The counts stop at the newest %d items: they cover the items from %s on.",
			feedback.CountBudget, counts.Since.UTC().Format("2006-01-02 15:04 UTC"))
	}
	for _, g := range counts.ByTool {
		v.ByTool = append(v.ByTool, views.FeedbackToolCount{Tool: g.Tool, Known: g.Known, Count: g.Count,
			URL: "/admin/feedback?" + url.Values{"tool": {g.Tool}}.Encode()})
	}
	for _, it := range page.Items {
		v.Items = append(v.Items, toFeedbackItem(it))
	}
	return render(c, status, views.FeedbackPage(s.shell(c, "Feedback", "admin"), v))
}

// feedbackMatchWords says how many items of a page matched ("3 match").
func feedbackMatchWords(n int) string {
	switch n {
	case 0:
		return "none match"
	case 1:
		return "one matches"
	}
	return fmt.Sprintf("%d match", n)
}

// feedbackPageJSON is a page of the triage list in the API.
type feedbackPageJSON struct {
	Items       []feedbackJSON     `json:"items"`
	ByTool      []feedbackToolJSON `json:"by_tool"`
	Weekly      []feedbackWeekJSON `json:"weekly"`
	NextCursor  string             `json:"next_cursor,omitempty"`
	Partial     bool               `json:"partial,omitempty"`
	CountsSince string             `json:"counts_since,omitempty"`
}

type feedbackToolJSON struct {
	ToolCalled string `json:"tool_called"`
	ToolKnown  bool   `json:"tool_known"`
	Count      int    `json:"count"`
}

type feedbackWeekJSON struct {
	WeekStart string `json:"week_start"`
	Count     int    `json:"count"`
}

func toFeedbackPageJSON(page feedback.Page, counts feedback.Counts) feedbackPageJSON {
	out := feedbackPageJSON{Items: []feedbackJSON{}, ByTool: []feedbackToolJSON{}, Weekly: []feedbackWeekJSON{},
		NextCursor: page.Next, Partial: page.Partial}
	for _, it := range page.Items {
		out.Items = append(out.Items, toFeedbackJSON(it))
	}
	for _, g := range counts.ByTool {
		out.ByTool = append(out.ByTool, feedbackToolJSON{ToolCalled: g.Tool, ToolKnown: g.Known, Count: g.Count})
	}
	for _, w := range counts.Weekly {
		out.Weekly = append(out.Weekly, feedbackWeekJSON{WeekStart: w.Start.Format("2006-01-02"), Count: w.Count})
	}
	if counts.Capped {
		out.CountsSince = rfc3339(counts.Since)
	}
	return out
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
// every item of the filter, as CSV, streamed a page at a time.
func (s *Server) feedbackCSV(c echo.Context) error {
	ctx, p := c.Request().Context(), principal(c)
	f, err := feedbackFilter(c.QueryParams())
	if err != nil {
		if rerr := feedback.MayTriage(p); rerr != nil {
			return rerr
		}
		return err
	}
	export, err := s.feedback.Export(ctx, p, f, time.Now())
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="feedback.csv"`)
	c.Response().WriteHeader(http.StatusOK)
	if err := export.WriteCSV(ctx, c.Response()); err != nil {
		// The answer has begun: it ends short, and only the log says why.
		s.log.Warn("feedback export stopped", "err", err, "request_id", c.Response().Header().Get(echo.HeaderXRequestID))
		return err
	}
	return nil
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
