package web

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

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

// pageLines is how many transcript lines the conversation page shows,
// and the Earlier control and the live feed add at a time.
const pageLines = 50

// maxShownCards bounds the cards a live page's feed re-checks: the last
// ones the page names (the latest, as earlier pages load above them).
const maxShownCards = 200

// conversationTranscript handles
// "GET /conversations/:id/transcript?after=<cursor>&card=<version>…&mode=…"
// for the page's live feed, and "…/transcript?before=<cursor>" for its
// Earlier control. The feed gets the lines after the page's cursor and
// the cards the page shows (by version) that changed since; when more
// lines came than a page holds, the latest page in place of the
// transcript. Each is a bounded read, whatever the conversation's length.
func (s *Server) conversationTranscript(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	ctx, p := c.Request().Context(), principal(c)
	if before := c.QueryParam("before"); before != "" {
		page, err := s.convs.Messages(ctx, p, id, conversations.Range{Limit: pageLines, Before: before})
		if err != nil {
			return err
		}
		lines, err := s.transcriptLines(c, id, page.Messages)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.TranscriptEarlierPage(id.String(), page.Prev, lines))
	}
	conv, err := s.convs.Get(ctx, p, id)
	if err != nil {
		return err
	}
	after := c.QueryParam("after")
	if after == "" && c.QueryParam("lines") != "" {
		// A page from before transcript pages counts its lines: it
		// reloads as a page of the latest lines.
		c.Response().Header().Set("HX-Refresh", "true")
		return c.NoContent(http.StatusNoContent)
	}
	u := views.TranscriptUpdateView{ConvID: id.String(), Mode: string(conv.PermissionMode), Nav: s.navCounts(c)}
	shownMode := c.QueryParam("mode")
	u.ModeChanged = shownMode != "" && shownMode != u.Mode
	if after != "" { // a window of earlier lines sends none: it adds no lines
		page, err := s.convs.Messages(ctx, p, id, conversations.Range{Limit: pageLines, After: after})
		if err != nil {
			return err
		}
		if page.Newer {
			// Further behind than a page: start again from the latest.
			if page, err = s.convs.Messages(ctx, p, id, conversations.Range{Limit: pageLines}); err != nil {
				return err
			}
			u.Reset, u.Earlier = true, page.Prev
		}
		if u.Added, err = s.transcriptLines(c, id, page.Messages); err != nil {
			return err
		}
		u.After = page.Next
	}
	if !u.Reset {
		if u.Changed, err = s.changedTranscriptCards(c, id, c.QueryParams()["card"]); err != nil {
			return err
		}
	}
	return render(c, http.StatusOK, views.TranscriptUpdate(u))
}

// transcriptLines are a page's messages as lines, each tool line with its
// card; the cards and the people they name are read in one query. The
// caller has checked that the conversation is the principal's.
func (s *Server) transcriptLines(c echo.Context, id uuid.UUID, msgs []conversations.Message) ([]views.TranscriptLine, error) {
	var ids []uuid.UUID
	for _, m := range msgs {
		if m.ProposalID != uuid.Nil {
			ids = append(ids, m.ProposalID)
		}
	}
	cards, err := s.cards(c, id, ids)
	if err != nil {
		return nil, err
	}
	lines := make([]views.TranscriptLine, 0, len(msgs))
	for _, m := range msgs {
		line := views.TranscriptLine{Role: m.Role, Content: m.Content}
		if card, ok := cards[m.ProposalID]; ok && m.ProposalID != uuid.Nil {
			line.Card = &card
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// cards are the conversation's proposals among ids as cards, read with
// their people in one query.
func (s *Server) cards(c echo.Context, id uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]views.ProposalCard, error) {
	found, err := s.props.ConversationCards(c.Request().Context(), principal(c).WorkspaceID, id, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]views.ProposalCard, len(found))
	for pid, card := range found {
		proposer, decider := peopleNames(card.Proposal, card.People)
		out[pid] = s.cardOf(card.Proposal, proposer, decider)
	}
	return out, nil
}

// changedTranscriptCards are the cards the page says it shows
// (views.CardVersion: "<id>:<version>"; the last maxShownCards of them)
// whose version differs now. Only those are read, by id, in the
// conversation: a card the page did not mention is left alone, and one
// of another conversation is not found.
func (s *Server) changedTranscriptCards(c echo.Context, id uuid.UUID, shown []string) ([]views.ProposalCard, error) {
	if len(shown) > maxShownCards {
		shown = shown[len(shown)-maxShownCards:]
	}
	versions := map[uuid.UUID]string{}
	var ids []uuid.UUID
	for _, v := range shown {
		raw, _, ok := strings.Cut(v, ":")
		pid, err := uuid.Parse(raw)
		if !ok || err != nil {
			continue
		}
		if _, dup := versions[pid]; !dup {
			ids = append(ids, pid)
		}
		versions[pid] = v
	}
	cards, err := s.cards(c, id, ids)
	if err != nil {
		return nil, err
	}
	var out []views.ProposalCard
	for _, pid := range ids {
		if card, ok := cards[pid]; ok && views.CardVersion(card) != versions[pid] {
			out = append(out, card)
		}
	}
	return out, nil
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
