package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// conversationsPage handles "GET /conversations".
func (s *Server) conversationsPage(c echo.Context) error {
	list, err := s.convs.List(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	items := make([]views.ConversationItem, len(list))
	for i, conv := range list {
		items[i] = views.ConversationItem{ID: conv.ID.String(), Title: conv.Title, Mode: string(conv.PermissionMode), Updated: conv.UpdatedAt.Format("2006-01-02 15:04")}
	}
	return render(c, http.StatusOK, views.ConversationsPage(s.shell(c, "Conversations", "conversations"), items))
}

// createConversation handles "POST /conversations".
func (s *Server) createConversation(c echo.Context) error {
	conv, err := s.convs.Create(c.Request().Context(), principal(c), c.FormValue("title"))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/conversations/"+conv.ID.String())
}

// conversationPage handles "GET /conversations/:id".
func (s *Server) conversationPage(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	ctx, p := c.Request().Context(), principal(c)
	conv, err := s.convs.Get(ctx, p, id)
	if err != nil {
		return err
	}
	msgs, err := s.convs.Transcript(ctx, p, id)
	if err != nil {
		return err
	}
	props, err := s.props.ForConversation(ctx, id)
	if err != nil {
		return err
	}
	v := views.ConversationView{ID: conv.ID.String(), Title: conv.Title, Mode: string(conv.PermissionMode)}
	for _, m := range msgs {
		line := views.TranscriptLine{Role: m.Role, Content: m.Content}
		if pr, ok := props[m.ProposalID]; ok && m.ProposalID != uuid.Nil {
			card := toCard(pr)
			line.Card = &card
		}
		v.Lines = append(v.Lines, line)
	}
	return render(c, http.StatusOK, views.ConversationPage(s.shell(c, conv.Title, "conversations"), v))
}

// setPermissionMode handles "POST /conversations/:id/mode" (the header toggle).
func (s *Server) setPermissionMode(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	mode := c.FormValue("permission_mode")
	conv, err := s.convs.Update(c.Request().Context(), principal(c), id, conversations.Update{PermissionMode: &mode})
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ModeToggle(conv.ID.String(), string(conv.PermissionMode)))
}

// applyProposal handles "POST /proposals/:id/apply" (Approve, Edit & approve).
func (s *Server) applyProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	var edited json.RawMessage
	if a := strings.TrimSpace(c.FormValue("arguments")); a != "" {
		edited = json.RawMessage(a)
	}
	p, err := s.props.Apply(c.Request().Context(), principal(c), id, edited)
	return s.renderCard(c, id, p, err)
}

// rejectProposal handles "POST /proposals/:id/reject".
func (s *Server) rejectProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	p, err := s.props.Reject(c.Request().Context(), principal(c), id, c.FormValue("reason"))
	return s.renderCard(c, id, p, err)
}

// renderCard swaps the card in place; a refused action re-renders the card
// as it is now, with the message next to the buttons.
func (s *Server) renderCard(c echo.Context, id uuid.UUID, p proposals.Proposal, err error) error {
	if err == nil {
		return render(c, http.StatusOK, views.ProposalCardView(toCard(p)))
	}
	code := apperr.Code(err)
	if code != apperr.EINVALID && code != apperr.ECONFLICT {
		return err
	}
	cur, gerr := s.props.Get(c.Request().Context(), principal(c), id)
	if gerr != nil {
		return gerr
	}
	card := toCard(cur)
	card.FormError = apperr.Message(err)
	return render(c, http.StatusUnprocessableEntity, views.ProposalCardView(card))
}

func toCard(p proposals.Proposal) views.ProposalCard {
	args := p.Arguments
	if len(p.AppliedArguments) > 0 {
		args = p.AppliedArguments
	}
	return views.ProposalCard{
		ID: p.ID.String(), Tool: p.Tool, Effect: string(p.Effect), Rationale: p.Rationale, Status: p.Status,
		Disposition: string(p.Disposition), Arguments: pretty(args), Result: pretty(p.Result), Error: p.Error,
		RejectionReason: p.RejectionReason, ApplyPath: p.ApplyPath, ProposedBy: p.ProposedBy,
	}
}

func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
