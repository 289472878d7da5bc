package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// The admin approvals queue: HTML for approvers in the browser, JSON for
// "Accept: application/json" (with a session or an approver's user token).

var rejectPresets = []string{
	"Not needed now.",
	"Wrong recipient.",
	"Amount too high.",
	"Needs more context from the requester.",
	"Against policy.",
}

type approvalJSON struct {
	ApprovalID      string              `json:"approval_id"`
	ProposalID      string              `json:"proposal_id"`
	Status          string              `json:"status"`
	Summary         string              `json:"summary"`
	Tool            string              `json:"tool"`
	ActionClass     string              `json:"action_class"`
	Risk            string              `json:"risk"`
	Arguments       json.RawMessage     `json:"arguments"`
	Rationale       string              `json:"rationale"`
	ApproverRole    string              `json:"approver_role"`
	RequiresWitness bool                `json:"requires_witness"`
	Proposer        string              `json:"proposer"`
	ProposedBy      string              `json:"proposed_by"`
	ConversationID  string              `json:"conversation_id,omitempty"`
	NotebookID      string              `json:"notebook_id,omitempty"`
	Constraints     []policy.Constraint `json:"constraints"`
	RejectionReason string              `json:"rejection_reason,omitempty"`
	CreatedAt       string              `json:"created_at"`
	ExpiresAt       string              `json:"expires_at"`
	TTLSeconds      int                 `json:"ttl_seconds"`
	Decision        *policy.Decision    `json:"decision,omitempty"`
	EffectDecision  *policy.Decision    `json:"effect_decision,omitempty"`
	// ProposedArguments is what the agent proposed when the owner edited
	// the call before it needed an approver.
	ProposedArguments json.RawMessage `json:"proposed_arguments,omitempty"`
	ProposalStatus    string          `json:"proposal_status,omitempty"`
	Error             string          `json:"error,omitempty"`
	Approvals         int             `json:"approvals"`
}

func toApprovalJSON(a proposals.Approval) approvalJSON {
	out := approvalJSON{ApprovalID: a.ID.String(), ProposalID: a.ProposalID.String(), Status: a.Status, Summary: a.Summary,
		Tool: a.Tool, ActionClass: a.ActionClass, Risk: a.Risk, Arguments: a.Arguments, Rationale: a.Rationale,
		ApproverRole: a.ApproverRole, RequiresWitness: a.RequiresWitness, Proposer: a.ProposerEmail, ProposedBy: a.ProposedBy,
		Constraints: a.Constraints, RejectionReason: a.RejectionReason, CreatedAt: rfc3339(a.CreatedAt), ExpiresAt: rfc3339(a.ExpiresAt),
		TTLSeconds: int(a.TTL(time.Now()).Seconds()), Decision: a.Decision, EffectDecision: a.EffectDecision,
		ProposedArguments: a.ProposedArguments, ProposalStatus: a.ProposalStatus, Error: a.Error, Approvals: len(a.Voters)}
	if out.Constraints == nil {
		out.Constraints = []policy.Constraint{}
	}
	switch a.Scope.Kind {
	case proposals.ScopeConversation:
		out.ConversationID = a.Scope.ID.String()
	case proposals.ScopeNotebook:
		out.NotebookID = a.Scope.ID.String()
	}
	return out
}

// jsonCaller is a caller that wants JSON: a bearer token or Accept.
func jsonCaller(c echo.Context) bool {
	return wantsJSON(c) || hasBearer(c)
}

func filterFrom(q url.Values) proposals.ApprovalFilter {
	f := proposals.ApprovalFilter{Status: q.Get("status"), Tool: q.Get("tool"), ActionClass: q.Get("action_class"), Risk: q.Get("risk")}
	if _, set := q["status"]; !set {
		f.Status = proposals.ApprovalPending
	}
	return f
}

// approvalsQueue handles "GET /admin/approvals".
func (s *Server) approvalsQueue(c echo.Context) error {
	return s.renderQueue(c, c.QueryParams(), http.StatusOK)
}

// renderQueue answers the queue for a filter, as JSON or as the page.
func (s *Server) renderQueue(c echo.Context, q url.Values, status int) error {
	f := filterFrom(q)
	list, err := s.props.Approvals(c.Request().Context(), principal(c), f)
	if err != nil {
		return err
	}
	if jsonCaller(c) {
		out := make([]approvalJSON, len(list))
		for i, a := range list {
			out[i] = toApprovalJSON(a)
		}
		return c.JSON(status, map[string]any{"approvals": out})
	}
	v := views.ApprovalsView{Filter: views.ApprovalFilter{Status: f.Status, Tool: f.Tool, ActionClass: f.ActionClass, Risk: f.Risk},
		Query: url.Values{"status": {f.Status}, "tool": {f.Tool}, "action_class": {f.ActionClass}, "risk": {f.Risk}}.Encode()}
	for _, t := range s.props.Tools() {
		v.Tools = append(v.Tools, t.Name)
	}
	now := time.Now()
	for _, a := range list {
		v.Items = append(v.Items, toApprovalItem(a, now))
	}
	stuck, err := s.props.Stuck(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	v.CanSettle = principal(c).IsAdmin()
	for _, p := range stuck {
		origin, link := "a conversation", "/conversations/"+p.Scope.ID.String()
		if p.Scope.Kind == proposals.ScopeNotebook {
			origin, link = "a notebook", "/notebooks/"+p.Scope.ID.String()
		}
		v.Stuck = append(v.Stuck, views.StuckItem{ID: p.ID.String(), Tool: p.Tool, Arguments: string(p.Arguments),
			Since: p.ClaimedAt.UTC().Format("2006-01-02 15:04 UTC"), Origin: origin, OriginURL: link})
	}
	return render(c, status, views.ApprovalsPage(s.shell(c, "Approvals", "approvals"), v))
}

func toApprovalItem(a proposals.Approval, now time.Time) views.ApprovalItem {
	origin, url := "a conversation", "/conversations/"+a.Scope.ID.String()
	if a.Scope.Kind == proposals.ScopeNotebook {
		origin, url = "a notebook", "/notebooks/"+a.Scope.ID.String()
	}
	proposer := a.ProposerEmail
	if a.ProposedBy == "agent" {
		proposer = "the agent of " + a.ProposerEmail
	}
	return views.ApprovalItem{ID: a.ID.String(), ProposalID: a.ProposalID.String(), Summary: a.Summary, Status: a.Status,
		Tool: a.Tool, ActionClass: a.ActionClass, Risk: a.Risk, Proposer: proposer, Origin: origin, OriginURL: url, ApproverRole: a.ApproverRole,
		ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339), Left: left(a.TTL(now))}
}

// left says a countdown for people ("3 h 12 min", "42 s").
func left(d time.Duration) string {
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	default:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
}

// approvalDetail handles "GET /admin/approvals/:id".
func (s *Server) approvalDetail(c echo.Context) error {
	id, err := pathID(c, proposals.ErrApprovalNotFound)
	if err != nil {
		return err
	}
	a, err := s.props.Approval(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	if jsonCaller(c) {
		return c.JSON(http.StatusOK, toApprovalJSON(a))
	}
	return render(c, http.StatusOK, views.ApprovalPage(s.shell(c, a.Summary, "approvals"), toApprovalDetail(a, "")))
}

func toApprovalDetail(a proposals.Approval, formError string) views.ApprovalDetail {
	d := views.ApprovalDetail{ApprovalItem: toApprovalItem(a, time.Now()), Arguments: string(a.Arguments), Rationale: a.Rationale,
		RejectionReason: a.RejectionReason, ApproverRole: a.ApproverRole, RequiresWitness: a.RequiresWitness, Voters: len(a.Voters),
		Result: string(a.Result), Error: a.Error, ProposalStatus: a.ProposalStatus, FormError: formError, Presets: rejectPresets,
		ProposedArguments: string(a.ProposedArguments), Decisions: decisionLines(a.Decision, a.EffectDecision)}
	if a.Decision != nil {
		for _, l := range a.Decision.Layers {
			d.Layers = append(d.Layers, [3]string{l.Layer, string(l.State), l.Reason})
		}
	}
	for _, c := range a.Similar {
		d.Similar = append(d.Similar, views.SimilarCall{Status: c.Status, Arguments: string(c.Arguments), When: c.CreatedAt.UTC().Format("2006-01-02 15:04")})
	}
	return d
}

// approveApproval handles "POST /admin/approvals/:id/approve".
func (s *Server) approveApproval(c echo.Context) error {
	id, err := pathID(c, proposals.ErrApprovalNotFound)
	if err != nil {
		return err
	}
	constraints, err := approvalConstraints(c)
	if err != nil {
		if jsonCaller(c) || apperr.Code(err) == apperr.EUNSUPPORTED {
			return err
		}
		return s.approvalFormError(c, id, err)
	}
	a, p, err := s.props.Approve(c.Request().Context(), principal(c), id, constraints)
	return s.resolved(c, id, a, p, err)
}

// rejectApproval handles "POST /admin/approvals/:id/reject".
func (s *Server) rejectApproval(c echo.Context) error {
	id, err := pathID(c, proposals.ErrApprovalNotFound)
	if err != nil {
		return err
	}
	reason, err := rejectionReason(c)
	if err != nil {
		if jsonCaller(c) || apperr.Code(err) == apperr.EUNSUPPORTED {
			return err
		}
		return s.approvalFormError(c, id, err)
	}
	a, p, err := s.props.RejectApproval(c.Request().Context(), principal(c), id, reason)
	return s.resolved(c, id, a, p, err)
}

// resolved answers an approve or reject: JSON with the packet and the
// proposal (the call's result); the refreshed queue for the queue's
// keyboard and row actions; the packet's page otherwise.
func (s *Server) resolved(c echo.Context, id uuid.UUID, a proposals.Approval, p proposals.Proposal, err error) error {
	if jsonCaller(c) {
		if err != nil {
			return err
		}
		full, gerr := s.props.Approval(c.Request().Context(), principal(c), id)
		if gerr != nil {
			return gerr
		}
		a = full
		status := http.StatusOK
		if a.Status == proposals.ApprovalPending {
			status = http.StatusAccepted // a witness is still needed
		}
		return c.JSON(status, map[string]any{"approval": toApprovalJSON(a), "proposal": toProposalJSON(p)})
	}
	if isHTMX(c) {
		if err != nil {
			return err // the flash area shows it
		}
		q := url.Values{}
		if u, perr := url.Parse(c.Request().Header.Get("HX-Current-URL")); perr == nil {
			q = u.Query()
		}
		return s.renderQueue(c, q, http.StatusOK)
	}
	if err != nil {
		return s.approvalFormError(c, id, err)
	}
	return c.Redirect(http.StatusSeeOther, "/admin/approvals/"+id.String())
}

// approvalFormError shows the packet's page with the message; errors the
// caller cannot fix here (not found, forbidden) are the usual error page.
func (s *Server) approvalFormError(c echo.Context, id uuid.UUID, err error) error {
	switch apperr.Code(err) {
	case apperr.EINVALID, apperr.ECONFLICT, apperr.EGONE, apperr.EFORBIDDEN:
	default:
		return err
	}
	a, gerr := s.props.Approval(c.Request().Context(), principal(c), id)
	if gerr != nil {
		return gerr
	}
	status := map[string]int{apperr.EINVALID: 422, apperr.ECONFLICT: 409, apperr.EGONE: 410, apperr.EFORBIDDEN: 403}[apperr.Code(err)]
	return render(c, status, views.ApprovalPage(s.shell(c, a.Summary, "approvals"), toApprovalDetail(a, apperr.Message(err))))
}

// bulkApprovals handles "POST /admin/approvals/bulk": approve or reject the
// selected packets; each is resolved on its own, and the queue says which
// could not be.
func (s *Server) bulkApprovals(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return apperr.Errorf(apperr.EBADREQ, "The form could not be read.")
	}
	action, reason := form.Get("action"), form.Get("reason")
	if action != "approve" && action != "reject" {
		return apperr.Invalid("Choose approve or reject.", apperr.FieldError{Field: "action", Message: "must be approve or reject"})
	}
	if action == "reject" && strings.TrimSpace(reason) == "" {
		return apperr.Invalid("Give a reason for rejecting the selected packets.", apperr.FieldError{Field: "reason", Message: "is required"})
	}
	if n := len(form["ids"]); n > maxBulkIDs {
		return apperr.Invalid(fmt.Sprintf("Select at most %d packets at once (%d were sent).", maxBulkIDs, n),
			apperr.FieldError{Field: "ids", Message: fmt.Sprintf("at most %d", maxBulkIDs)})
	}
	ctx, p := c.Request().Context(), principal(c)
	var failed []string
	for _, raw := range form["ids"] {
		id, err := uuid.Parse(raw)
		if err != nil {
			failed = append(failed, "A selected packet id was not valid.")
			continue
		}
		if action == "approve" {
			_, _, err = s.props.Approve(ctx, p, id, nil)
		} else {
			_, _, err = s.props.RejectApproval(ctx, p, id, reason)
		}
		if err != nil {
			failed = append(failed, apperr.Message(err))
		}
	}
	if len(failed) > 0 {
		// A header carries a bounded summary, never the whole list.
		msg := strings.Join(failed[:min(len(failed), 3)], " ")
		if len(failed) > 3 {
			msg += fmt.Sprintf(" (%d more could not be resolved.)", len(failed)-3)
		}
		c.Response().Header().Set("HX-Trigger", mustJSON(map[string]any{"bulk-failed": truncateRunes(msg, 1000)}))
	}
	q, _ := url.ParseQuery(form.Get("query"))
	return s.renderQueue(c, q, http.StatusOK)
}

// maxBulkIDs caps a bulk approve or reject.
const maxBulkIDs = 100

// truncateRunes cuts s to at most n characters.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// outboxPage handles "GET /admin/outbox".
func (s *Server) outboxPage(c echo.Context) error {
	items, err := s.props.Outbox(c.Request().Context(), principal(c), 200)
	if err != nil {
		return err
	}
	rows := make([]views.OutboxRow, len(items))
	for i, it := range items {
		rows[i] = views.OutboxRow{Kind: it.Kind, Recipient: it.Recipient, Subject: it.Subject, Body: it.Body,
			When: it.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")}
		if it.ResponseStatus != 0 {
			rows[i].Status = strconv.Itoa(it.ResponseStatus)
		}
	}
	return render(c, http.StatusOK, views.OutboxPage(s.shell(c, "Outbox", "admin"), rows))
}

// settleStuck handles "POST /admin/proposals/:id/settle" (admins): what a
// stuck call did, as a person found it.
func (s *Server) settleStuck(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	if _, err := s.props.Settle(c.Request().Context(), principal(c), id, c.FormValue("ran") == "yes", c.FormValue("note")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/approvals")
}
