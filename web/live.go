package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/views"
)

// conversationEvents handles "GET /conversations/:id/events": the
// conversation's changes, what waits for the user and (for resolvers) the
// packets, for its owner only (404 for anyone else, like the page).
func (s *Server) conversationEvents(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	p := principal(c)
	if _, err := s.convs.Get(c.Request().Context(), p, id); err != nil {
		return err
	}
	return s.stream(c, topicEvents(p, events.Conversation(id)))
}

// notebookEvents handles "GET /notebooks/:id/events", like
// conversationEvents.
func (s *Server) notebookEvents(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	p := principal(c)
	if _, err := s.nbs.Get(c.Request().Context(), p, id); err != nil {
		return err
	}
	return s.stream(c, topicEvents(p, events.Notebook(id)))
}

// conversationTranscript handles
// "GET /conversations/:id/transcript?lines=N&card=<version>…": for the
// page's live feed, the lines after the first N and the cards the page
// shows (by version) that changed since.
func (s *Server) conversationTranscript(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.QueryParam("lines"))
	if err != nil || n < 0 {
		return apperr.Invalid("lines must be a count of lines.", apperr.FieldError{Field: "lines", Message: "must be a whole number, 0 or more"})
	}
	conv, err := s.convs.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	lines, err := s.transcript(c, id)
	if err != nil {
		return err
	}
	shown := min(n, len(lines))
	var cards []views.ProposalCard
	for _, l := range lines[:shown] {
		if l.Card != nil {
			cards = append(cards, *l.Card)
		}
	}
	mode := string(conv.PermissionMode)
	shownMode := c.QueryParam("mode")
	return render(c, http.StatusOK, views.TranscriptUpdate(lines[shown:], changedCards(cards, c.QueryParams()["card"]), len(lines), s.navCounts(c),
		id.String(), mode, shownMode != "" && shownMode != mode))
}

// transcript is a conversation's lines, each tool line with its card. The
// caller has checked that the conversation is the principal's.
func (s *Server) transcript(c echo.Context, id uuid.UUID) ([]views.TranscriptLine, error) {
	ctx := c.Request().Context()
	msgs, err := s.convs.Transcript(ctx, principal(c), id)
	if err != nil {
		return nil, err
	}
	props, err := s.props.ForConversation(ctx, id)
	if err != nil {
		return nil, err
	}
	lines := make([]views.TranscriptLine, 0, len(msgs))
	for _, m := range msgs {
		line := views.TranscriptLine{Role: m.Role, Content: m.Content}
		if pr, ok := props[m.ProposalID]; ok && m.ProposalID != uuid.Nil {
			card := s.toCard(pr)
			line.Card = &card
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// changedCards are the cards whose version differs from the one the page
// said it shows (views.CardVersion: "<id>:<version>"). A card the page did
// not mention is left alone.
func changedCards(cards []views.ProposalCard, shown []string) []views.ProposalCard {
	versions := map[string]string{}
	for _, v := range shown {
		if id, _, ok := strings.Cut(v, ":"); ok {
			versions[id] = v
		}
	}
	var out []views.ProposalCard
	for _, c := range cards {
		if v, ok := versions[c.ID]; ok && v != views.CardVersion(c) {
			out = append(out, c)
		}
	}
	return out
}

// navCounts is what waits for the signed-in user, for the header (nil for
// agents and when it cannot be read: the header then shows no count).
func (s *Server) navCounts(c echo.Context) *views.NavCounts {
	p, ok := c.Get(principalKey).(auth.Principal)
	if !ok || p.IsAgent() || s.props == nil {
		return nil
	}
	cards, packets, err := s.props.WaitingCounts(c.Request().Context(), p)
	if err != nil {
		s.log.Warn("counting what waits", "err", err)
		return nil
	}
	return &views.NavCounts{Cards: cards, Packets: packets}
}
