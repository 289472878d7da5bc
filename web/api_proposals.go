package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/telemetry"
	"github.com/gatehouse/gatehouse/internal/tools"
)

type proposalJSON struct {
	ProposalID       string          `json:"proposal_id"`
	ConversationID   string          `json:"conversation_id,omitempty"`
	NotebookID       string          `json:"notebook_id,omitempty"`
	Tool             string          `json:"tool"`
	Effect           string          `json:"effect"`
	Arguments        json.RawMessage `json:"arguments"`
	AppliedArguments json.RawMessage `json:"applied_arguments,omitempty"`
	Rationale        string          `json:"rationale"`
	Status           string          `json:"status"`
	Disposition      string          `json:"disposition"`
	PermissionMode   string          `json:"permission_mode,omitempty"`
	TrustLevel       string          `json:"trust_level,omitempty"`
	Result           json.RawMessage `json:"result,omitempty"`
	Error            string          `json:"error,omitempty"`
	RejectionReason  string          `json:"rejection_reason,omitempty"`
	ApplyPath        string          `json:"apply_path,omitempty"`
	ConfirmURL       string          `json:"confirm_url,omitempty"`
	Authority        string          `json:"authority,omitempty"`
	Risk             string          `json:"risk,omitempty"`
	ActionClass      string          `json:"action_class,omitempty"`
	Decision         *decisionJSON   `json:"decision,omitempty"`
	EffectDecision   *decisionJSON   `json:"effect_decision,omitempty"`
	DryRun           bool            `json:"dry_run,omitempty"`
	RequiresApproval bool            `json:"requires_human_approval,omitempty"`
	ApprovalID       string          `json:"approval_id,omitempty"`
	ApprovalURL      string          `json:"approval_url,omitempty"`
	ApproverRole     string          `json:"approver_role,omitempty"`
	Summary          string          `json:"summary,omitempty"`
	ApprovalsNeeded  int             `json:"approvals_needed,omitempty"`
	// EscalatedTo is the role a waiting packet was escalated to, and when.
	EscalatedTo string `json:"escalated_to,omitempty"`
	EscalatedAt string `json:"escalated_at,omitempty"`
	TTLSeconds  *int   `json:"ttl_seconds,omitempty"`
	// OutcomeUnknown marks a call that was claimed but whose outcome was
	// never recorded (its request died): it is under review, never re-run.
	ConfirmIgnored string `json:"confirm_ignored,omitempty"`
	OutcomeUnknown bool   `json:"outcome_unknown,omitempty"`
	Note           string `json:"note,omitempty"`
	CreatedAt      string `json:"created_at"`
	// ExecutionTicket lets the proposing caller run a caller-executed
	// call until TicketExpiresAt, then report it (api_caller.go).
	ExecutionTicket string `json:"execution_ticket,omitempty"`
	TicketExpiresAt string `json:"ticket_expires_at,omitempty"`
	// Declaration is the tool as its caller declared it with the call.
	Declaration *tools.CallerDeclaration `json:"declaration,omitempty"`
}

func toProposalJSON(p proposals.Proposal) proposalJSON {
	out := proposalJSON{
		ProposalID: p.ID.String(), Tool: p.Tool, Effect: string(p.Effect),
		Arguments: p.Arguments, AppliedArguments: p.AppliedArguments, Rationale: p.Rationale, Status: p.Status,
		Disposition: p.Disposition, PermissionMode: string(p.PermissionMode), TrustLevel: string(p.TrustLevel),
		Result: p.Result, Error: p.Error, RejectionReason: p.RejectionReason,
		ApplyPath: p.ApplyPath, CreatedAt: rfc3339(p.CreatedAt),
		Authority: string(p.Authority), Risk: string(p.Risk), ActionClass: p.ActionClass, Decision: toDecisionJSON(p.Decision), EffectDecision: toDecisionJSON(p.EffectDecision), DryRun: p.DryRun,
		RequiresApproval: p.Status == proposals.StatusPendingApproval, ConfirmIgnored: p.ConfirmIgnored, Declaration: p.Declaration,
	}
	switch p.Scope.Kind {
	case proposals.ScopeConversation:
		out.ConversationID = p.Scope.ID.String()
	case proposals.ScopeNotebook:
		out.NotebookID = p.Scope.ID.String()
	}
	if p.Status == proposals.StatusPending {
		out.ConfirmURL = proposalURL(p)
	}
	if t := p.Ticket; t != nil {
		out.ExecutionTicket, out.TicketExpiresAt = t.Value, rfc3339(t.ExpiresAt)
	}
	if a := p.Packet; a != nil {
		ttl := int(max(0, time.Until(a.ExpiresAt).Seconds()))
		out.ApprovalID, out.ApprovalURL, out.Summary, out.TTLSeconds = a.ID.String(), "/admin/approvals/"+a.ID.String(), a.Summary, &ttl
		out.ApproverRole, out.ApprovalsNeeded = a.ApproverRole, a.Needed
		if a.EscalatedAt != nil {
			out.EscalatedTo, out.EscalatedAt = a.EscalatedTo, rfc3339(*a.EscalatedAt)
			if p.Status == proposals.StatusPendingApproval {
				out.Note = fmt.Sprintf("Still waiting: nobody of the %s role decided in time, so it was escalated to the %s role as well at %s. It runs only if approved before %s.",
					a.ApproverRole, a.EscalatedTo, out.EscalatedAt, rfc3339(a.ExpiresAt))
			}
		}
	}
	return out
}

// proposalStatus is 202 for a call that waits for a person or has not
// finished, 200 otherwise.
func proposalStatus(p proposals.Proposal) int {
	if p.Status == proposals.StatusPending || p.Status == proposals.StatusPendingApproval || p.Status == proposals.StatusApplying {
		return http.StatusAccepted
	}
	return http.StatusOK
}

// proposalURL is where the owner sees the proposal: its card in the
// conversation, or its cell in the notebook.
func proposalURL(p proposals.Proposal) string {
	if p.Scope.Kind == proposals.ScopeNotebook {
		return "/notebooks/" + p.Scope.ID.String() + "#proposal-" + p.ID.String()
	}
	return "/conversations/" + p.Scope.ID.String() + "#proposal-" + p.ID.String()
}

// apiProposeInConversation handles "POST /api/v1/conversations/:id/tool-calls".
func (s *Server) apiProposeInConversation(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	return s.apiProposeToolCall(c, proposals.InConversation(id))
}

// apiProposeInNotebook handles "POST /api/v1/notebooks/:id/tool-calls".
func (s *Server) apiProposeInNotebook(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	return s.apiProposeToolCall(c, proposals.InNotebook(id))
}

// apiProposeToolCall proposes a call. With an idempotency key (the
// Idempotency-Key header, or idempotency_key in the body), a replay of the
// same request gets the first response, byte for byte, and runs nothing.
func (s *Server) apiProposeToolCall(c echo.Context, scope proposals.Scope) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	in, err := decodeToolCall(body, c.Request().Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	ctx, pr := c.Request().Context(), principal(c)
	if tool, ok := s.props.Tool(in.Tool); ok && tool.Upstream != "" {
		// A held upstream tool is refused with its reason (the decision
		// would only say it cannot be classified).
		if err := s.upstreams.Callable(ctx, tool); err != nil {
			return err
		}
	}
	key := in.IdempotencyKey
	call := proposals.Input{Tool: in.Tool, Arguments: in.Arguments, Rationale: in.Rationale, IdempotencyKey: key, Confirm: in.Confirm,
		Declaration: in.Declaration}
	begun, err := s.beginIdempotent(c, scope, call)
	if err != nil {
		return err
	}
	switch {
	case begun.Replay != nil:
		c.Response().Header().Set("Idempotent-Replayed", "true")
		return c.Blob(begun.Replay.Status, begun.Replay.ContentType, begun.Replay.Body)
	case begun.Recorded != nil:
		// The request that held the key died after recording the call: its
		// real state, never a second run.
		c.Response().Header().Set("Idempotent-Replayed", "true")
		out := toProposalJSON(*begun.Recorded)
		if begun.Recorded.Status == proposals.StatusApplying {
			out.OutcomeUnknown = true
			out.Note = "The call was claimed, but the request that ran it stopped before its outcome was recorded. It is under review by an admin and is never run again on its own; read this proposal later for the outcome."
		}
		return c.JSON(proposalStatus(*begun.Recorded), out)
	}
	idem := begun.Held
	defer idem.Release(ctx) // a request refused before it recorded anything stores nothing
	call.Idem = idem
	p, err := s.cfg.Telemetry.Propose(telemetry.Extract(ctx, c.Request().Header), call.Tool, func(ctx context.Context) (proposals.Proposal, error) {
		return s.props.Propose(ctx, pr, scope, call)
	})
	if err != nil && p.ID != uuid.Nil {
		// Refused after it was recorded (a human-only call waits for the
		// principal): a retry gets this same refusal.
		prob := problemFor(c, err)
		body, merr := json.Marshal(prob.body())
		if merr != nil {
			return merr
		}
		if serr := idem.Store(ctx, proposals.StoredResponse{Status: prob.Status, ContentType: "application/problem+json", Body: body}); serr != nil {
			// Recorded and linked to its key, as below.
			s.log.Warn("storing an idempotent response", "err", serr, "proposal_id", p.ID, "request_id", prob.RequestID)
		}
		return err
	}
	if err != nil {
		return err
	}
	if p.RationaleWarning != "" {
		c.Response().Header().Set("Warning", `299 - "`+p.RationaleWarning+`"`)
	}
	answer, err := json.Marshal(toProposalJSON(p))
	if err != nil {
		return err
	}
	if err := idem.Store(ctx, proposals.StoredResponse{Status: proposalStatus(p), ContentType: echo.MIMEApplicationJSON, Body: answer}); err != nil {
		// The call is recorded and its key linked to it: the caller gets
		// its outcome now, and a retry its real state after the key's
		// lease. A 503 here would say nothing was done.
		s.log.Warn("storing an idempotent response", "err", err, "proposal_id", p.ID, "request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	}
	return c.Blob(proposalStatus(p), echo.MIMEApplicationJSON, answer)
}

// toolCallBody is a proposed call as the caller sent it.
type toolCallBody struct {
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Rationale      string          `json:"rationale"`
	IdempotencyKey string          `json:"idempotency_key"`
	Confirm        bool            `json:"confirm"`
	// Declaration declares the caller's own tool with the call
	// (docs/caller-tools.md).
	Declaration *tools.CallerDeclaration `json:"declaration"`
}

// decodeToolCall decodes a tool-call body strictly (see strictjson: no
// duplicate key can choose the tool, nothing hides after the value) and
// settles its idempotency key: the header's or the body's, the same if
// both are sent, in the key format.
func decodeToolCall(body []byte, headerKey string) (toolCallBody, error) {
	var in toolCallBody
	if err := decodeJSON(body, &in); err != nil {
		return toolCallBody{}, err
	}
	if headerKey != "" && in.IdempotencyKey != "" && headerKey != in.IdempotencyKey {
		return toolCallBody{}, &apperr.Error{Code: apperr.EBADREQ, Message: "The Idempotency-Key header and idempotency_key differ; send one key.",
			Fields: []apperr.FieldError{{Field: "idempotency_key", Message: "differs from the Idempotency-Key header"}}}
	}
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = headerKey
	}
	if in.IdempotencyKey != "" {
		if _, err := proposals.ParseIdempotencyKey(in.IdempotencyKey); err != nil {
			return toolCallBody{}, err
		}
	}
	return in, nil
}

// beginIdempotent holds the call's idempotency key, if it has one, or
// answers for it (see proposals.BeginIdempotent). The request hash covers
// the scope and the whole call, so the same key with another request is
// refused.
func (s *Server) beginIdempotent(c echo.Context, scope proposals.Scope, in proposals.Input) (proposals.Begun, error) {
	if in.IdempotencyKey == "" {
		return proposals.Begun{}, nil
	}
	request := map[string]any{"scope": scope.Kind, "scope_id": scope.ID, "tool": in.Tool, "arguments": in.Arguments, "rationale": in.Rationale}
	if in.Confirm {
		request["confirm"] = true // a confirmed call is another request than the same call unconfirmed
	}
	if in.Declaration != nil {
		request["declaration"] = in.Declaration // another declaration is another request
	}
	hash, err := proposals.RequestHash(request)
	if err != nil {
		return proposals.Begun{}, err
	}
	return s.props.BeginIdempotentCall(c.Request().Context(), principal(c), scope, in, hash)
}

// apiDecide handles "POST /api/v1/decisions": how would this call be
// decided now? It writes nothing but an audit row.
func (s *Server) apiDecide(c echo.Context) error {
	var in struct {
		ConversationID string          `json:"conversation_id"`
		NotebookID     string          `json:"notebook_id"`
		Tool           string          `json:"tool"`
		Arguments      json.RawMessage `json:"arguments"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	var scope proposals.Scope
	switch {
	case (in.ConversationID == "") == (in.NotebookID == ""):
		return apperr.Invalid("Name exactly one of conversation_id and notebook_id.",
			apperr.FieldError{Field: "conversation_id", Message: "exactly one of conversation_id and notebook_id is required"})
	case in.ConversationID != "":
		id, err := uuid.Parse(in.ConversationID)
		if err != nil {
			return conversations.ErrNotFound
		}
		scope = proposals.InConversation(id)
	default:
		id, err := uuid.Parse(in.NotebookID)
		if err != nil {
			return notebooks.ErrNotFound
		}
		scope = proposals.InNotebook(id)
	}
	d, err := s.props.DryRun(c.Request().Context(), principal(c), scope, in.Tool, in.Arguments)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toDecisionJSON(&d))
}

// apiGetProposal handles "GET /api/v1/proposals/:id", and with
// ?wait=30s (and &status=, the status last seen) waits for a change
// (api_caller.go).
func (s *Server) apiGetProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	if c.QueryParam("wait") != "" {
		return s.apiWaitProposal(c, id)
	}
	p, err := s.props.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProposalJSON(p))
}

// apiApplyProposal handles "POST /api/v1/proposals/:id/apply".
func (s *Server) apiApplyProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	p, err := s.props.Apply(c.Request().Context(), principal(c), id, in.Arguments)
	if err != nil {
		return err
	}
	// 202 when the call now needs an approver: the edited call waits in a
	// packet, and nothing ran.
	return c.JSON(proposalStatus(p), toProposalJSON(p))
}

// apiPerformProposal handles "POST /api/v1/proposals/:id/performed".
func (s *Server) apiPerformProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	p, err := s.props.Perform(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProposalJSON(p))
}

// apiRejectProposal handles "POST /api/v1/proposals/:id/reject".
func (s *Server) apiRejectProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := s.props.Reject(c.Request().Context(), principal(c), id, in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProposalJSON(p))
}
