package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/proposals"
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
	CreatedAt        string          `json:"created_at"`
}

func toProposalJSON(p proposals.Proposal) proposalJSON {
	out := proposalJSON{
		ProposalID: p.ID.String(), Tool: p.Tool, Effect: string(p.Effect),
		Arguments: p.Arguments, AppliedArguments: p.AppliedArguments, Rationale: p.Rationale, Status: p.Status,
		Disposition: p.Disposition, PermissionMode: string(p.PermissionMode), TrustLevel: string(p.TrustLevel),
		Result: p.Result, Error: p.Error, RejectionReason: p.RejectionReason,
		ApplyPath: p.ApplyPath, CreatedAt: rfc3339(p.CreatedAt),
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
	return out
}

// proposalStatus is 202 for a call that waits for a person, 200 otherwise.
func proposalStatus(p proposals.Proposal) int {
	if p.Status == proposals.StatusPending {
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

func (s *Server) apiProposeToolCall(c echo.Context, scope proposals.Scope) error {
	var in struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Rationale string          `json:"rationale"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := s.props.Propose(c.Request().Context(), principal(c), scope, proposals.Input{Tool: in.Tool, Arguments: in.Arguments, Rationale: in.Rationale})
	if err != nil {
		return err
	}
	return c.JSON(proposalStatus(p), toProposalJSON(p))
}

// apiGetProposal handles "GET /api/v1/proposals/:id".
func (s *Server) apiGetProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
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
