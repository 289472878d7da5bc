package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// conversationsPage handles "GET /conversations[?before=<cursor>]": a
// page of the caller's conversations, most recently active first, with a
// link to the next.
func (s *Server) conversationsPage(c echo.Context) error {
	page, err := s.convs.List(c.Request().Context(), principal(c), conversations.ListPage{Limit: conversations.DefaultListLimit, Before: c.QueryParam("before")})
	if err != nil {
		return err
	}
	items := make([]views.ConversationItem, len(page.Conversations))
	for i, conv := range page.Conversations {
		items[i] = views.ConversationItem{ID: conv.ID.String(), Title: conv.Title, Mode: string(conv.PermissionMode), Updated: conv.UpdatedAt.Format("2006-01-02 15:04")}
	}
	return render(c, http.StatusOK, views.ConversationsPage(s.shell(c, "Conversations", "conversations"), views.ConversationsView{
		Items: items, Next: page.Next, Paged: c.QueryParam("before") != ""}))
}

// createConversation handles "POST /conversations".
func (s *Server) createConversation(c echo.Context) error {
	conv, err := s.convs.Create(c.Request().Context(), principal(c), c.FormValue("title"))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/conversations/"+conv.ID.String())
}

// conversationPage handles "GET /conversations/:id[?before=|after=<cursor>]":
// the latest page of the transcript, or (following an Earlier or Later
// link without JavaScript) the page before or after a cursor.
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
	page, err := s.convs.Messages(ctx, p, id, conversations.Range{Limit: pageLines, Before: c.QueryParam("before"), After: c.QueryParam("after")})
	if err != nil {
		return err
	}
	lines, err := s.transcriptLines(c, id, page.Messages)
	if err != nil {
		return err
	}
	v := views.ConversationView{ID: conv.ID.String(), Title: conv.Title, Mode: string(conv.PermissionMode), Environment: conv.Environment, Earlier: page.Prev}
	if page.Newer {
		v.Later = page.Next // a window of earlier lines: links, no live lines
	} else {
		v.After = page.Next
	}
	if conv.PermissionMode == policy.ModeApprove {
		if v.Hints, err = s.graduationHints(c, proposals.InConversation(id), "/conversations/"+id.String()+"/mode", "permission_mode", "auto", "auto mode"); err != nil {
			return err
		}
	}
	v.Lines = lines
	if v.Chat, err = s.chatView(c, id); err != nil {
		return err
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
	s.announce(principal(c).WorkspaceID, events.Conversation(id))
	if !isHTMX(c) {
		// A graduation hint's button (a plain form): back to the page.
		return c.Redirect(http.StatusSeeOther, "/conversations/"+conv.ID.String())
	}
	return render(c, http.StatusOK, views.ModeToggle(conv.ID.String(), string(conv.PermissionMode)))
}

// setConversationEnvironment handles "POST /conversations/:id/environment"
// (the header's picker): the owner says where its calls take effect.
func (s *Server) setConversationEnvironment(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	env := c.FormValue("environment")
	conv, err := s.convs.Update(c.Request().Context(), principal(c), id, conversations.Update{Environment: &env})
	action := "/conversations/" + id.String() + "/environment"
	if apperr.Code(err) == apperr.EINVALID {
		return render(c, http.StatusUnprocessableEntity, views.EnvironmentPicker(action, "", apperr.Message(err)))
	}
	if err != nil {
		return err
	}
	s.announce(principal(c).WorkspaceID, events.Conversation(id))
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/conversations/"+conv.ID.String())
	}
	return render(c, http.StatusOK, views.EnvironmentPicker(action, conv.Environment, ""))
}

// postMessage handles "POST /conversations/:id/messages": the owner writes
// in the transcript from the page.
func (s *Server) postMessage(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	content := c.FormValue("content")
	if handled, err := s.startTurnFromPage(c, id, content); handled {
		return err // the owner's message starts a model turn (web/chat.go)
	}
	_, err = s.convs.PostMessage(c.Request().Context(), principal(c), id, "user", content)
	if apperr.Code(err) == apperr.EINVALID {
		return render(c, http.StatusUnprocessableEntity, views.Composer(id.String(), content, apperr.Message(err)))
	}
	if err != nil {
		return err
	}
	// The transcript's live feed shows the message (this page at once, by
	// the trigger; every other page open on it, by the event).
	s.announce(principal(c).WorkspaceID, events.Conversation(id))
	c.Response().Header().Set("HX-Trigger", "transcript-changed")
	return render(c, http.StatusOK, views.Composer(id.String(), "", ""))
}
