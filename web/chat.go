package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/chat"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/views"
)

// chatEnabled reports whether a model answers the owner's messages.
func (s *Server) chatEnabled() bool { return s.chat != nil && s.chat.Config().Enabled() }

// chatView is the page's view of the conversation's chat.
func (s *Server) chatView(c echo.Context, id uuid.UUID) (views.ChatView, error) {
	v := views.ChatView{ConversationID: id.String()}
	if s.chat == nil {
		return v, nil
	}
	panel, err := s.chat.Panel(c.Request().Context(), principal(c), id)
	if err != nil {
		return v, err
	}
	v.Enabled, v.Models, v.Model, v.Agent, v.Tokens = panel.Enabled, panel.Models, panel.Settings.Model, panel.Agent, panel.Tokens
	if panel.Settings.Budget > 0 {
		v.Budget = strconv.FormatInt(panel.Settings.Budget, 10)
	}
	if t := panel.Turn; t != nil {
		tv := &views.ChatTurnView{ID: t.ID.String(), State: string(t.State), Active: t.State.Active(), Streaming: t.Streaming, Error: t.Error}
		for _, call := range t.Calls {
			if call.Status == "pending" || call.Status == "pending_approval" || call.Status == "applying" {
				tv.Waiting++
			}
		}
		v.Turn = tv
	}
	return v, nil
}

// chatPanel handles "GET /conversations/:id/chat": the chat panel as it
// is now (the page asks after each refresh of its transcript feed, that
// is on each of the conversation's events), with the header's token total.
func (s *Server) chatPanel(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	return s.renderChatRefresh(c, id)
}

func (s *Server) renderChatRefresh(c echo.Context, id uuid.UUID) error {
	v, err := s.chatView(c, id)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ChatRefresh(v))
}

// stopChat handles "POST /conversations/:id/chat/stop".
func (s *Server) stopChat(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	turn, err := uuid.Parse(c.FormValue("turn_id"))
	if err != nil || s.chat == nil {
		return chat.ErrNotFound
	}
	if _, err := s.chat.Stop(c.Request().Context(), principal(c), id, turn); err != nil && apperr.Code(err) != apperr.ECONFLICT {
		return err
	}
	// Stopped now, or it had ended already: the panel says which.
	return s.renderChatRefresh(c, id)
}

// saveChatSettings handles "POST /conversations/:id/chat/settings".
func (s *Server) saveChatSettings(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	if s.chat == nil {
		return conversations.ErrNotFound
	}
	in := chat.Settings{Model: c.FormValue("model")}
	budget := strings.TrimSpace(c.FormValue("token_budget"))
	var bad error
	if budget != "" {
		n, perr := strconv.ParseInt(strings.ReplaceAll(budget, ",", ""), 10, 64)
		if perr != nil || n <= 0 {
			bad = apperr.Invalid("The token budget must be a whole number of tokens, or empty for none.",
				apperr.FieldError{Field: "token_budget", Message: "must be a whole number, or empty"})
		}
		in.Budget = n
	}
	if bad == nil {
		_, bad = s.chat.SetSettings(c.Request().Context(), principal(c), id, in)
	}
	v, err := s.chatView(c, id)
	if err != nil {
		return err
	}
	if apperr.Code(bad) == apperr.EINVALID {
		v.Budget, v.SettingsError = budget, apperr.Message(bad)
		return render(c, http.StatusUnprocessableEntity, views.ChatSettings(v))
	}
	if bad != nil {
		return bad
	}
	return render(c, http.StatusOK, views.ChatSettings(v))
}

// startTurnFromPage starts a model turn on the owner's message from the
// composer; handled is false when no model is configured (the message is
// only posted, as before).
func (s *Server) startTurnFromPage(c echo.Context, id uuid.UUID, content string) (handled bool, err error) {
	if !s.chatEnabled() {
		return false, nil
	}
	st, err := s.chat.Start(c.Request().Context(), principal(c), id, content)
	switch apperr.Code(err) {
	case apperr.EINVALID, apperr.ECONFLICT:
		return true, render(c, http.StatusUnprocessableEntity, views.Composer(id.String(), content, apperr.Message(err)))
	}
	if err != nil {
		return true, err
	}
	_ = st // the turn announced itself: the transcript's live feed shows the message
	c.Response().Header().Set("HX-Trigger", "transcript-changed")
	return true, render(c, http.StatusOK, views.Composer(id.String(), "", ""))
}

// startedJSON is a user message that started a model turn.
type startedJSON struct {
	messageJSON
	TurnID  string `json:"turn_id"`
	TurnURL string `json:"turn_url"`
}

// apiStartTurn starts a model turn on a user message posted over REST with
// the owner's user token; handled is false when the message only joins
// the transcript (no model, an agent, or the assistant's role).
func (s *Server) apiStartTurn(c echo.Context, id uuid.UUID, role, content string) (handled bool, err error) {
	p := principal(c)
	if role != "user" || p.IsAgent() || !s.chatEnabled() {
		return false, nil
	}
	st, err := s.chat.Start(c.Request().Context(), p, id, content)
	if err != nil {
		return true, err
	}
	out := startedJSON{messageJSON: messageJSON{ID: st.MessageID, Role: "user", Content: st.Content, CreatedAt: rfc3339(st.CreatedAt)},
		TurnID: st.Turn.ID.String(), TurnURL: turnURL(id, st.Turn.ID)}
	return true, c.JSON(http.StatusCreated, out)
}

func turnURL(conversation, turn uuid.UUID) string {
	return "/api/v1/conversations/" + conversation.String() + "/turns/" + turn.String()
}

type turnCallJSON struct {
	ToolCallID string  `json:"tool_call_id"`
	Tool       string  `json:"tool"`
	ProposalID *string `json:"proposal_id,omitempty"`
	Status     string  `json:"status"`
}

type turnJSON struct {
	ID               string         `json:"id"`
	ConversationID   string         `json:"conversation_id"`
	Model            string         `json:"model"`
	State            string         `json:"state"`
	Streaming        string         `json:"streaming,omitempty"`
	PromptTokens     int64          `json:"prompt_tokens"`
	CompletionTokens int64          `json:"completion_tokens"`
	Error            string         `json:"error,omitempty"`
	Calls            []turnCallJSON `json:"calls"`
	URL              string         `json:"url"`
	CreatedAt        string         `json:"created_at"`
	UpdatedAt        string         `json:"updated_at"`
}

func toTurnJSON(t chat.Turn) turnJSON {
	out := turnJSON{ID: t.ID.String(), ConversationID: t.ConversationID.String(), Model: t.Model, State: string(t.State), Streaming: t.Streaming,
		PromptTokens: t.PromptTokens, CompletionTokens: t.CompletionTokens, Error: t.Error, Calls: []turnCallJSON{},
		URL: turnURL(t.ConversationID, t.ID), CreatedAt: rfc3339(t.CreatedAt), UpdatedAt: rfc3339(t.UpdatedAt)}
	for _, c := range t.Calls {
		call := turnCallJSON{ToolCallID: c.ToolCallID, Tool: c.Tool, Status: c.Status}
		if c.ProposalID != uuid.Nil {
			id := c.ProposalID.String()
			call.ProposalID = &id
		}
		out.Calls = append(out.Calls, call)
	}
	return out
}

// turnIDs parses the :id and :turn_id path parameters.
func turnIDs(c echo.Context) (conversation, turn uuid.UUID, err error) {
	if conversation, err = pathID(c, conversations.ErrNotFound); err != nil {
		return
	}
	if turn, err = uuid.Parse(c.Param("turn_id")); err != nil {
		return uuid.Nil, uuid.Nil, chat.ErrNotFound
	}
	return conversation, turn, nil
}

// apiGetTurn handles "GET /api/v1/conversations/:id/turns/:turn_id".
func (s *Server) apiGetTurn(c echo.Context) error {
	conv, turn, err := turnIDs(c)
	if err != nil {
		return err
	}
	if s.chat == nil {
		return chat.ErrNotFound
	}
	t, err := s.chat.Get(c.Request().Context(), principal(c), conv, turn)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTurnJSON(t))
}

// apiStopTurn handles "POST /api/v1/conversations/:id/turns/:turn_id/stop".
func (s *Server) apiStopTurn(c echo.Context) error {
	conv, turn, err := turnIDs(c)
	if err != nil {
		return err
	}
	if s.chat == nil {
		return chat.ErrNotFound
	}
	t, err := s.chat.Stop(c.Request().Context(), principal(c), conv, turn)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTurnJSON(t))
}
