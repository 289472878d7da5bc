package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

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
	// ApprovalsNeeded is how many distinct approvers it needs (its
	// quorum; 2 with a witness).
	ApprovalsNeeded int `json:"approvals_needed"`
	// Escalation: the role it is (or was) escalated to while pending, and
	// when.
	EscalateTo  string `json:"escalate_to,omitempty"`
	EscalateAt  string `json:"escalate_at,omitempty"`
	EscalatedAt string `json:"escalated_at,omitempty"`
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
	out.ApprovalsNeeded, out.EscalateTo = a.Needed(), a.EscalateTo
	if a.EscalateAt != nil {
		out.EscalateAt = rfc3339(*a.EscalateAt)
	}
	if a.EscalatedAt != nil {
		out.EscalatedAt = rfc3339(*a.EscalatedAt)
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

// filterQuery is the filter as the inbox's links carry it; the status is
// always there, since an absent status means pending and an empty one any.
func filterQuery(f proposals.ApprovalFilter) string {
	return filterValues(f).Encode()
}

func filterValues(f proposals.ApprovalFilter) url.Values {
	q := url.Values{"status": {f.Status}}
	for k, v := range map[string]string{"tool": f.Tool, "action_class": f.ActionClass, "risk": f.Risk} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// pageFrom is the page a request asks for: ?cursor= (the next_cursor of
// the page before; none for the first page) and ?limit= (1 to 200,
// default 50). A limit that is not a number is passed on as out of range,
// so the service refuses it after checking the caller's rights.
func pageFrom(q url.Values) proposals.ApprovalPageRequest {
	req := proposals.ApprovalPageRequest{Cursor: q.Get("cursor"), Limit: proposals.ApprovalPageDefault}
	if raw, set := q["limit"]; set {
		n, err := strconv.Atoi(strings.TrimSpace(raw[0]))
		if err != nil {
			n = -1
		}
		req.Limit = n
	}
	return req
}

// pageQuery is the filter and the page as the inbox's links carry them:
// the cursor, and the limit when it is not the default.
func pageQuery(f proposals.ApprovalFilter, req proposals.ApprovalPageRequest) string {
	q := filterValues(f)
	if req.Cursor != "" {
		q.Set("cursor", req.Cursor)
	}
	if req.Limit != proposals.ApprovalPageDefault {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	return q.Encode()
}

// isPageError says whether err refuses the page asked for (its cursor or
// its limit), rather than the filter or the caller.
func isPageError(err error) bool {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.EINVALID {
		return false
	}
	for _, f := range ae.Fields {
		if f.Field == "cursor" || f.Field == "limit" {
			return true
		}
	}
	return false
}

// inboxState is what an answer of the inbox page shows beyond the filter:
// the open packet, what the last action did, and errors next to their
// controls.
type inboxState struct {
	// selected is the packet to open; explicit says the caller asked for
	// it (a deep link), so a packet that cannot be shown is 404.
	selected uuid.UUID
	explicit bool
	// afterAction: the answer to an action on acted, which opens next (the
	// packet the page asked for, X-Inbox-Next, when it is still listed)
	// and says how many packets are left.
	afterAction bool
	acted, next uuid.UUID
	selectErr   string
	confirm     string
	formError   string
	formAt      string // "approve" or "reject"
	reason      string
	bulkError   string
	bulkReason  string
	checked     []string
}

// csrfToken is the request's CSRF token, for forms in fragments.
func csrfToken(c echo.Context) string {
	t, _ := c.Get(middleware.DefaultCSRFConfig.ContextKey).(string)
	return t
}

// approvalsQueue handles "GET /admin/approvals": JSON, a page at a time
// (?cursor=, ?limit=), or the inbox page (?selected=<id> opens a packet).
func (s *Server) approvalsQueue(c echo.Context) error {
	q := c.QueryParams()
	if jsonCaller(c) {
		page, err := s.props.Approvals(c.Request().Context(), principal(c), filterFrom(q), pageFrom(q))
		if err != nil {
			return err
		}
		out := make([]approvalJSON, len(page.Approvals))
		for i, a := range page.Approvals {
			out[i] = toApprovalJSON(a)
		}
		body := map[string]any{"approvals": out}
		if page.Next != "" {
			body["next_cursor"] = page.Next
		}
		if page.Partial {
			body["partial"] = true
		}
		return c.JSON(http.StatusOK, body)
	}
	var st inboxState
	if raw := q.Get("selected"); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			st.selectErr = "That packet link is not valid; pick a packet from the list."
		}
		st.selected, st.explicit = id, err == nil
	}
	return s.renderInbox(c, q, st, http.StatusOK)
}

// approvalDetail handles "GET /admin/approvals/:id": JSON, the inbox page
// with the packet open, or (for the inbox's htmx requests) its detail pane.
func (s *Server) approvalDetail(c echo.Context) error {
	id, err := pathID(c, proposals.ErrApprovalNotFound)
	if err != nil && jsonCaller(c) {
		return err
	}
	if jsonCaller(c) {
		a, err := s.props.Approval(c.Request().Context(), principal(c), id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toApprovalJSON(a))
	}
	st := inboxState{selected: id, explicit: true}
	if err != nil {
		st.selectErr = "That packet link is not valid; pick a packet from the list."
		return s.renderInbox(c, c.QueryParams(), st, http.StatusNotFound)
	}
	if isHTMX(c) && c.Request().Header.Get("HX-Target") == "detail" && err == nil {
		a, err := s.props.Approval(c.Request().Context(), principal(c), id)
		if err != nil {
			if apperr.Code(err) != apperr.ENOTFOUND {
				return err
			}
			return render(c, http.StatusNotFound, views.ApprovalDetailPane(views.ApprovalsView{DetailMessage: notFoundMessage}))
		}
		d := s.toApprovalDetail(a, c.QueryParams(), time.Now())
		return render(c, http.StatusOK, views.ApprovalDetailView(csrfToken(c), d))
	}
	return s.renderInbox(c, c.QueryParams(), st, http.StatusOK)
}

const notFoundMessage = "No such packet here: it belongs to another workspace, or waits for a role you do not hold."

// renderInbox renders the inbox page: the filter bar with its counts, the
// list, and the open packet.
func (s *Server) renderInbox(c echo.Context, q url.Values, st inboxState, status int) error {
	ctx, p, now := c.Request().Context(), principal(c), time.Now()
	f := filterFrom(q)
	v := views.ApprovalsView{CSRF: csrfToken(c), Confirmation: st.confirm, BulkError: st.bulkError, BulkReason: st.bulkReason,
		Checked: map[string]bool{}, CanSettle: p.IsAdmin()}
	if err := f.Validate(); err != nil {
		// A bad filter value is dropped and said next to the filters; the
		// rest of the filter still applies.
		var ae *apperr.Error
		if !errors.As(err, &ae) {
			return err
		}
		v.FilterError = ae.Message
		for _, fe := range ae.Fields {
			switch fe.Field {
			case "status":
				f.Status = proposals.ApprovalPending
			case "risk":
				f.Risk = ""
			case "tool":
				f.Tool = ""
			case "action_class":
				f.ActionClass = ""
			}
		}
		status = max(status, http.StatusUnprocessableEntity)
	}
	req := pageFrom(q)
	page, err := s.props.Approvals(ctx, p, f, req)
	if isPageError(err) {
		// A page link that cannot be read: the first page, with the
		// message next to the filters.
		v.FilterError = strings.TrimSpace(v.FilterError + " " + apperr.Message(err))
		status = max(status, http.StatusUnprocessableEntity)
		req = proposals.ApprovalPageRequest{Limit: proposals.ApprovalPageDefault}
		page, err = s.props.Approvals(ctx, p, f, req)
	}
	if err != nil {
		return err
	}
	list := page.Approvals
	counts, err := s.props.CountApprovals(ctx, p, f)
	if err != nil {
		return err
	}
	v.Filter = views.ApprovalFilter{Status: f.Status, Tool: f.Tool, ActionClass: f.ActionClass, Risk: f.Risk}
	v.Query = pageQuery(f, req)
	v.Statuses, v.Risks = filterLinks(f, counts)
	pageLinks(&v, f, req, page)
	if st.afterAction {
		st.selected = nextToOpen(list, st.next, st.acted)
		st.confirm += leftWords(counts.Pending)
		v.Confirmation = st.confirm
	}
	for _, t := range s.props.Tools() {
		v.Tools = append(v.Tools, t.Name)
	}
	for _, id := range st.checked {
		v.Checked[id] = true
	}
	selected := st.selected
	if selected == uuid.Nil && len(list) > 0 && st.selectErr == "" {
		selected = list[0].ID
	}
	for _, a := range list {
		item := s.toApprovalItem(a, v.Query, now)
		item.Selected = a.ID == selected
		v.Items = append(v.Items, item)
	}
	v.DetailMessage = st.selectErr
	// An htmx request for a part of the inbox gets that part: a live
	// refresh of the list needs neither the open packet nor the stuck calls.
	part := ""
	if isHTMX(c) {
		part = c.Request().Header.Get("HX-Target")
	}
	if selected != uuid.Nil && part != "inbox-list" {
		a, err := s.props.Approval(ctx, p, selected)
		switch {
		case err == nil:
			shown, _ := url.ParseQuery(v.Query) // the filter and page as read, not as asked
			d := s.toApprovalDetail(a, shown, now)
			d.FormError, d.FormErrorAt, d.Reason = st.formError, st.formAt, st.reason
			v.Detail = &d
		case apperr.Code(err) == apperr.ENOTFOUND:
			v.DetailMessage = notFoundMessage
			if st.explicit && status < 400 {
				status = http.StatusNotFound
			}
		default:
			return err
		}
	}
	var stuck []proposals.Proposal
	if part == "" {
		if stuck, err = s.props.Stuck(ctx, p); err != nil {
			return err
		}
	}
	for _, sp := range stuck {
		origin, link := "a conversation", "/conversations/"+sp.Scope.ID.String()
		if sp.Scope.Kind == proposals.ScopeNotebook {
			origin, link = "a notebook", "/notebooks/"+sp.Scope.ID.String()
		}
		v.Stuck = append(v.Stuck, views.StuckItem{ID: sp.ID.String(), Tool: sp.Tool, Arguments: string(sp.Arguments),
			Since: sp.ClaimedAt.UTC().Format("2006-01-02 15:04 UTC"), Origin: origin, OriginURL: link})
	}
	title := "Approvals"
	if v.Detail != nil {
		title = v.Detail.Summary + " · Approvals"
	}
	return render(c, status, views.ApprovalsPage(s.shell(c, title, "approvals"), v))
}

// pageLinks are the links to the next page and back to the first, and
// the note of a page that read its budget before it filled.
func pageLinks(v *views.ApprovalsView, f proposals.ApprovalFilter, req proposals.ApprovalPageRequest, page proposals.ApprovalPage) {
	v.NextLabel = "Older"
	if f.Status == proposals.ApprovalPending {
		v.NextLabel = "Next" // soonest expiry first: later ones follow
	}
	if page.Next != "" {
		v.NextURL = "/admin/approvals?" + pageQuery(f, proposals.ApprovalPageRequest{Cursor: page.Next, Limit: req.Limit})
	}
	if req.Cursor != "" {
		v.FirstURL = "/admin/approvals?" + pageQuery(f, proposals.ApprovalPageRequest{Limit: req.Limit})
	}
	if page.Partial {
		v.PageNote = fmt.Sprintf("This page read %d packets and %s this filter; “%s” reads on from there.",
			proposals.ApprovalPageBudget, matchWords(len(page.Approvals)), v.NextLabel)
	}
}

// matchWords says how many packets of a page matched ("3 match").
func matchWords(n int) string {
	switch n {
	case 0:
		return "none match"
	case 1:
		return "one matches"
	}
	return fmt.Sprintf("%d match", n)
}

// nextToOpen is the packet to open after an action: the one the page asked
// for when it is still listed, otherwise the first pending packet other
// than the one acted on (none: the first listed).
func nextToOpen(list []proposals.Approval, next, acted uuid.UUID) uuid.UUID {
	for _, a := range list {
		if a.ID == next && next != uuid.Nil {
			return next
		}
	}
	for _, a := range list {
		if a.ID != acted && a.Status == proposals.ApprovalPending {
			return a.ID
		}
	}
	return uuid.Nil
}

// leftWords says how many packets are left to decide under the filter.
func leftWords(n proposals.BoundedCount) string {
	switch {
	case n.AtLeast:
		return fmt.Sprintf(" %d+ packets left.", n.N)
	case n.N == 0:
		return " Nothing else is waiting here."
	case n.N == 1:
		return " 1 packet left."
	}
	return fmt.Sprintf(" %d packets left.", n.N)
}

// filterLinks are the filter bar's choices with their counts: each status
// keeps the risk filter, each risk keeps the status.
func filterLinks(f proposals.ApprovalFilter, n proposals.ApprovalCounts) (statuses, risks []views.FilterLink) {
	type option struct {
		value, label string
		count        proposals.BoundedCount
	}
	// links are one filter's options: each keeps the other filters, sets
	// this one (set), and is active when it is the current value.
	links := func(current string, set func(*proposals.ApprovalFilter, string), opts ...option) []views.FilterLink {
		out := make([]views.FilterLink, 0, len(opts))
		for _, o := range opts {
			g := f
			set(&g, o.value)
			value := o.value
			if value == "" {
				value = "any"
			}
			link := views.FilterLink{Label: o.label, Value: value, URL: "/admin/approvals?" + filterQuery(g), Count: o.count.N,
				AtLeast: o.count.AtLeast, Active: current == o.value}
			if o.count.AtLeast {
				link.Note = fmt.Sprintf("%d among the %d packets read: the count stops there, so there may be more.", o.count.N, proposals.ApprovalCountBudget)
			}
			out = append(out, link)
		}
		return out
	}
	statuses = links(f.Status, func(g *proposals.ApprovalFilter, v string) { g.Status = v },
		option{"pending", "Pending", n.Pending}, option{"approved", "Approved", n.Approved}, option{"rejected", "Rejected", n.Rejected},
		option{"expired", "Expired", n.Expired}, option{"", "All", n.AnyStatus})
	risks = links(f.Risk, func(g *proposals.ApprovalFilter, v string) { g.Risk = v },
		option{"high", "High risk", n.High}, option{"medium", "Medium", n.Medium}, option{"low", "Low", n.Low}, option{"", "Any risk", n.AnyRisk})
	return statuses, risks
}

func (s *Server) toApprovalItem(a proposals.Approval, query string, now time.Time) views.ApprovalItem {
	kind, link := "conversation", "/conversations/"+a.Scope.ID.String()
	if a.Scope.Kind == proposals.ScopeNotebook {
		kind, link = "notebook", "/notebooks/"+a.Scope.ID.String()
	}
	u := "/admin/approvals/" + a.ID.String()
	if query != "" {
		u += "?" + query
	}
	item := views.ApprovalItem{ID: a.ID.String(), ProposalID: a.ProposalID.String(), Summary: a.Summary, Status: a.Status,
		Tool: a.Tool, ActionClass: a.ActionClass, Risk: a.Risk, Effect: a.Effect, Proposer: proposerWords(a),
		Origin: a.OriginTitle, OriginKind: kind, OriginURL: link, ApproverRole: a.ApproverRole,
		Expires:    views.Moment{RFC3339: a.ExpiresAt.UTC().Format(time.RFC3339), Absolute: absolute(a.ExpiresAt), Relative: countdownWords(a.TTL(now))},
		ResolvedBy: a.ResolvedByEmail, Votes: a.VoteCount, Irreversible: s.irreversible(a), URL: u, Needed: a.Needed(), EscalateTo: a.EscalateTo}
	if a.ResolvedAt != nil {
		item.Resolved = moment(*a.ResolvedAt, now)
	}
	if a.EscalatedAt != nil {
		item.Escalated = moment(*a.EscalatedAt, now)
	} else if a.EscalateAt != nil {
		item.Escalates = moment(*a.EscalateAt, now)
	}
	return item
}

// proposerWords says who proposed a call: the agent token by name, with
// the person it acts for, or the person.
func proposerWords(a proposals.Approval) string {
	if a.ProposedBy != "agent" {
		return a.ProposerEmail
	}
	if a.TokenName != "" {
		return fmt.Sprintf("agent “%s” of %s", a.TokenName, a.ProposerEmail)
	}
	return "an agent of " + a.ProposerEmail
}

// irreversible says what cannot be undone once the packet's call runs:
// destructive, irreversible and payment calls ask for a second, explicit
// confirmation; "" for the others.
func (s *Server) irreversible(a proposals.Approval) string {
	tool, ok := s.props.Tool(a.Tool)
	payment := strings.HasPrefix(a.ActionClass, "payment.")
	switch {
	case payment:
		return fmt.Sprintf("Approving makes the payment (%s) at once; a payment cannot be recalled.", a.Summary)
	case a.Effect == string(policy.EffectDestructive) || (ok && tool.Effect == policy.EffectDestructive):
		return fmt.Sprintf("Approving runs %s at once and destroys data; it cannot be undone.", strings.TrimSuffix(a.Summary, "."))
	case ok && tool.Contract.Authority == policy.AuthorityIrreversible:
		return fmt.Sprintf("Approving runs %s at once; it cannot be undone.", strings.TrimSuffix(a.Summary, "."))
	}
	return ""
}

// moment is a time for people: relative, with the absolute time.
func moment(t, now time.Time) views.Moment {
	return views.Moment{RFC3339: t.UTC().Format(time.RFC3339), Absolute: absolute(t), Relative: ago(now.Sub(t))}
}

func absolute(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04 UTC") }

// ago says how long ago something happened ("3 min ago").
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
}

// countdownWords labels the time a packet has left ("expires in 2 h 5 min").
func countdownWords(d time.Duration) string {
	if d <= 0 {
		return "expired"
	}
	return "expires in " + left(d)
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

func (s *Server) toApprovalDetail(a proposals.Approval, q url.Values, now time.Time) views.ApprovalDetail {
	f, query := filterFrom(q), ""
	if f.Validate() != nil {
		f = proposals.ApprovalFilter{Status: proposals.ApprovalPending}
		query = filterQuery(f)
	} else {
		query = pageQuery(f, pageFrom(q))
	}
	d := views.ApprovalDetail{ApprovalItem: s.toApprovalItem(a, query, now), Arguments: string(a.Arguments), Rationale: a.Rationale,
		RejectionReason: a.RejectionReason, RequiresWitness: a.RequiresWitness, Result: string(a.Result), Error: a.Error,
		ProposalStatus: a.ProposalStatus, Presets: rejectPresets, ProposedArguments: string(a.ProposedArguments),
		Created: moment(a.CreatedAt, now), AuditURL: "/audit?object=" + a.ID.String(), CallAuditURL: "/audit?object=" + a.ProposalID.String()}
	// The layers shown are those of the decision that held the call for an
	// approver: the one at the owner's confirm when that escalated it,
	// otherwise the one taken when it was proposed.
	dec := a.Decision
	d.DecisionWhen = "when it was proposed"
	if a.EffectDecision != nil && a.EffectDecision.State.Rank() >= policy.StateDeferred.Rank() &&
		(dec == nil || dec.State.Rank() < policy.StateDeferred.Rank()) {
		dec, d.DecisionWhen = a.EffectDecision, "when its owner confirmed it"
	}
	if dec != nil {
		held := false
		for _, l := range dec.Layers {
			line := views.LayerLine{Layer: l.Layer, State: string(l.State), Reason: l.Reason}
			if !held && l.State == dec.State {
				line.Held, held = true, true // the strictest layer, first of equals
			}
			d.Layers = append(d.Layers, line)
		}
		d.Constraints = append(d.Constraints, dec.Constraints...)
	}
	for _, c := range a.Constraints {
		d.Constraints = append(d.Constraints, describeConstraint(c)+" (attached by an approver)")
	}
	for _, v := range a.Votes {
		d.VoteLines = append(d.VoteLines, views.VoteLine{Email: v.Email, At: moment(v.At, now)})
	}
	for _, c := range a.Similar {
		d.Similar = append(d.Similar, views.SimilarCall{Tool: c.Tool, Status: c.Status, How: similarHow[c.ApplyPath],
			Arguments: string(c.Arguments), When: moment(c.CreatedAt, now)})
	}
	return d
}

// similarHow says who let a similar call run, by its apply path.
var similarHow = map[string]string{
	proposals.PathAuto:     "automatically",
	proposals.PathHuman:    "by its owner",
	proposals.PathApproval: "by an approver",
}

// describeConstraint says a constraint in words.
func describeConstraint(c policy.Constraint) string {
	name := strings.ReplaceAll(c.Kind, "_", " ")
	switch {
	case len(c.Values) > 0:
		return name + ": " + strings.Join(c.Values, ", ")
	case c.Kind == policy.ConstraintMaxAmount:
		return fmt.Sprintf("%s %g", name, c.Amount)
	case !c.At.IsZero():
		return name + " " + absolute(c.At)
	case c.Limit > 0:
		return fmt.Sprintf("%s %d per %s", name, c.Limit, c.Window)
	}
	return name
}

// approveApproval handles "POST /admin/approvals/:id/approve". From a page,
// a call that cannot be undone needs irreversible_ack=1 (the second
// confirmation); the REST API does not ask for it.
func (s *Server) approveApproval(c echo.Context) error {
	id, err := pathID(c, proposals.ErrApprovalNotFound)
	if err != nil {
		return err
	}
	constraints, err := s.approvalConstraintsOrTGP(c, id)
	if err != nil {
		if jsonCaller(c) || apperr.Code(err) == apperr.EUNSUPPORTED {
			return err
		}
		return s.inboxFormError(c, id, "approve", err)
	}
	if !jsonCaller(c) && c.FormValue("irreversible_ack") != "1" {
		a, err := s.props.Approval(c.Request().Context(), principal(c), id)
		if err != nil {
			return s.inboxFormError(c, id, "approve", err)
		}
		if note := s.irreversible(a); note != "" && a.Status == proposals.ApprovalPending {
			return s.inboxFormError(c, id, "approve", apperr.Invalid(note+" Confirm that you mean it, then approve again; nothing was done.",
				apperr.FieldError{Field: "irreversible_ack", Message: "is required for a call that cannot be undone"}))
		}
	}
	if form, ferr := c.FormParams(); ferr == nil && grantsFormChosen(form) {
		// Approve and allow similar (grants.go): one transaction.
		choice, err := grantChoiceFromForm(form)
		if err != nil {
			return s.resolved(c, id, "approve", proposals.Approval{}, proposals.Proposal{}, err)
		}
		a, p, err := s.props.ApproveAndGrant(c.Request().Context(), principal(c), id, constraints, choice)
		if err == nil {
			grantsChanged(c)
		}
		return s.resolved(c, id, "approve", a, p, err)
	}
	a, p, err := s.props.Approve(c.Request().Context(), principal(c), id, constraints)
	return s.resolved(c, id, "approve", a, p, err)
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
		return s.inboxFormError(c, id, "reject", err)
	}
	a, p, err := s.props.RejectApproval(c.Request().Context(), principal(c), id, reason)
	return s.resolved(c, id, "reject", a, p, err)
}

// resolved answers an approve or reject: JSON with the packet and the
// proposal (the call's result); for the inbox (htmx), the inbox with the
// next packet open and a confirmation of what was done; the packet's page
// otherwise.
func (s *Server) resolved(c echo.Context, id uuid.UUID, action string, a proposals.Approval, p proposals.Proposal, err error) error {
	if jsonCaller(c) {
		if err != nil {
			return err
		}
		// The status says what this request did: 202 when its vote was
		// recorded and more approvers are needed (a witness, a quorum),
		// even if another approver's vote resolved the packet since.
		status := http.StatusOK
		if a.Status == proposals.ApprovalPending {
			status = http.StatusAccepted
		}
		full, gerr := s.props.Approval(c.Request().Context(), principal(c), id)
		if gerr != nil {
			return gerr
		}
		a = full
		return c.JSON(status, map[string]any{"approval": toApprovalJSON(a), "proposal": toProposalJSON(p)})
	}
	if err != nil {
		return s.inboxFormError(c, id, action, err)
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/admin/approvals/"+id.String())
	}
	var done string
	switch {
	case action == "reject":
		done = fmt.Sprintf("Rejected %s: %s.", p.Tool, strings.TrimSuffix(a.Summary, "."))
	case a.Status == proposals.ApprovalPending:
		done = fmt.Sprintf("Your approval of %s is recorded: %d of the %d approvals it needs; it waits for another approver.", p.Tool, a.VoteCount, a.Needed())
	case p.Status == proposals.StatusFailed:
		done = fmt.Sprintf("Approved %s, but the call failed: %s", p.Tool, p.Error)
	default:
		done = fmt.Sprintf("Approved %s: %s.", p.Tool, strings.TrimSuffix(a.Summary, "."))
	}
	q := inboxQuery(c)
	return s.renderAfterAction(c, q, inboxState{confirm: done}, id)
}

// renderAfterAction renders the inbox after an action: the packet the
// page asked to open next (X-Inbox-Next) when it is still listed,
// otherwise the first; the confirmation says how many are left.
func (s *Server) renderAfterAction(c echo.Context, q url.Values, st inboxState, acted uuid.UUID) error {
	if filterFrom(q).Validate() != nil {
		q = url.Values{}
	}
	st.afterAction, st.acted, st.selected = true, acted, uuid.Nil
	st.next, _ = uuid.Parse(c.Request().Header.Get("X-Inbox-Next"))
	return s.renderInbox(c, q, st, http.StatusOK)
}

// inboxQuery is the inbox's filter of an action: the bulk form's query
// field, or the query of the page the request came from.
func inboxQuery(c echo.Context) url.Values {
	if raw := c.FormValue("query"); raw != "" {
		q, _ := url.ParseQuery(raw)
		return q
	}
	if u, err := url.Parse(c.Request().Header.Get("HX-Current-URL")); err == nil && u.Path != "" {
		q := u.Query()
		q.Del("selected")
		return q
	}
	return url.Values{}
}

// inboxFormError shows the inbox with the packet open and the message next
// to the control that caused it (the approve or reject button), with the
// status of the error; errors the caller cannot act on here are the usual
// error page.
func (s *Server) inboxFormError(c echo.Context, id uuid.UUID, at string, err error) error {
	status, ok := map[string]int{apperr.EINVALID: 422, apperr.ECONFLICT: 409, apperr.EGONE: 410, apperr.EFORBIDDEN: 403,
		apperr.ENOTFOUND: 404, apperr.EBADREQ: 400}[apperr.Code(err)]
	if !ok {
		return err
	}
	st := inboxState{selected: id, explicit: true, formError: apperr.Message(err), formAt: at}
	if at == "reject" {
		st.reason = c.FormValue("reason")
	}
	q := inboxQuery(c)
	if !isHTMX(c) {
		q = c.QueryParams()
	}
	return s.renderInbox(c, q, st, status)
}

// bulkApprovals handles "POST /admin/approvals/bulk": approve or reject the
// selected packets; each is resolved on its own, and the inbox says how
// many were and why the others could not be, next to the bulk controls. A
// call that cannot be undone is approved in bulk only with
// irreversible_ack=1.
func (s *Server) bulkApprovals(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return apperr.Errorf(apperr.EBADREQ, "The form could not be read.")
	}
	action, reason, ids := form.Get("action"), form.Get("reason"), form["ids"]
	q, _ := url.ParseQuery(form.Get("query"))
	st := inboxState{bulkReason: reason, checked: ids}
	switch {
	case action != "approve" && action != "reject":
		st.bulkError = "Choose approve or reject."
	case len(ids) == 0:
		st.bulkError = "Select packets first (x, or their checkboxes)."
	case len(ids) > maxBulkIDs:
		st.bulkError = fmt.Sprintf("Select at most %d packets at once (%d were sent).", maxBulkIDs, len(ids))
	case action == "reject" && strings.TrimSpace(reason) == "":
		st.bulkError = "Give a reason for rejecting the selected packets."
	}
	if st.bulkError != "" {
		return s.renderInbox(c, q, st, http.StatusUnprocessableEntity)
	}
	ctx, p := c.Request().Context(), principal(c)
	var failed []string
	done := 0
	for _, raw := range ids {
		id, err := uuid.Parse(raw)
		if err != nil {
			failed = append(failed, "A selected packet id was not valid.")
			continue
		}
		if action == "approve" {
			if form.Get("irreversible_ack") != "1" {
				if a, gerr := s.props.Approval(ctx, p, id); gerr == nil && a.Status == proposals.ApprovalPending && s.irreversible(a) != "" {
					failed = append(failed, fmt.Sprintf("“%s” cannot be undone: confirm it, or approve it on its own.", a.Summary))
					continue
				}
			}
			_, _, err = s.props.Approve(ctx, p, id, nil)
		} else {
			_, _, err = s.props.RejectApproval(ctx, p, id, reason)
		}
		if err != nil {
			failed = append(failed, apperr.Message(err))
			continue
		}
		done++
	}
	verb := map[string]string{"approve": "Approved", "reject": "Rejected"}[action]
	st = inboxState{confirm: fmt.Sprintf("%s %d of %d selected.", verb, done, len(ids))}
	if len(failed) > 0 {
		msg := fmt.Sprintf("%d could not be %s: ", len(failed), strings.ToLower(verb)) + strings.Join(failed[:min(len(failed), 3)], " ")
		if len(failed) > 3 {
			msg += fmt.Sprintf(" (and %d more)", len(failed)-3)
		}
		st.bulkError = clip.Ellipsis(msg, 1000)
		st.checked = ids
	}
	if !isHTMX(c) && len(failed) == 0 {
		f := filterFrom(q)
		if f.Validate() != nil {
			f = proposals.ApprovalFilter{Status: proposals.ApprovalPending}
		}
		return c.Redirect(http.StatusSeeOther, "/admin/approvals?"+pageQuery(f, pageFrom(q)))
	}
	return s.renderAfterAction(c, q, st, uuid.Nil)
}

// maxBulkIDs caps a bulk approve or reject.
const maxBulkIDs = 100

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
			When: it.CreatedAt}
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
