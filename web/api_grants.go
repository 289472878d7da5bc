package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/grants"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// grantJSON is a grant over the API (openapi.yaml, Grant).
type grantJSON struct {
	ID             string              `json:"id"`
	Status         string              `json:"status"`
	Tool           string              `json:"tool,omitempty"`
	ActionClass    string              `json:"action_class,omitempty"`
	Scope          string              `json:"scope"`
	ConversationID string              `json:"conversation_id,omitempty"`
	NotebookID     string              `json:"notebook_id,omitempty"`
	TokenID        string              `json:"token_id,omitempty"`
	Owner          string              `json:"owner"`
	GrantedBy      string              `json:"granted_by"`
	Ceiling        string              `json:"ceiling"`
	ApproverRole   string              `json:"approver_role,omitempty"`
	Bounds         []policy.Constraint `json:"bounds"`
	MaxCalls       int                 `json:"max_calls"`
	Remaining      int                 `json:"remaining"`
	CreatedAt      string              `json:"created_at"`
	ExpiresAt      string              `json:"expires_at"`
	RevokedAt      string              `json:"revoked_at,omitempty"`
	LastUsedAt     string              `json:"last_used_at,omitempty"`
	ProposalID     string              `json:"proposal_id,omitempty"`
	ApprovalID     string              `json:"approval_id,omitempty"`
}

func toGrantJSON(g grants.Grant, now time.Time) grantJSON {
	out := grantJSON{ID: g.ID.String(), Status: g.Status(now), Tool: g.Tool, ActionClass: g.ActionClass, Scope: g.Scope,
		Owner: g.OwnerEmail, GrantedBy: g.GrantedByEmail, Ceiling: g.Ceiling, ApproverRole: g.ApproverRole, Bounds: g.Bounds,
		MaxCalls: g.MaxCalls, Remaining: g.Remaining, CreatedAt: rfc3339(g.CreatedAt), ExpiresAt: rfc3339(g.ExpiresAt)}
	if out.Bounds == nil {
		out.Bounds = []policy.Constraint{}
	}
	switch g.Scope {
	case grants.ScopeConversation:
		out.ConversationID = g.ScopeID.String()
	case grants.ScopeNotebook:
		out.NotebookID = g.ScopeID.String()
	default:
		out.TokenID = g.ScopeID.String()
	}
	if g.RevokedAt != nil {
		out.RevokedAt = rfc3339(*g.RevokedAt)
	}
	if g.LastUsedAt != nil {
		out.LastUsedAt = rfc3339(*g.LastUsedAt)
	}
	if g.ProposalID.Valid {
		out.ProposalID = g.ProposalID.UUID.String()
	}
	if g.ApprovalID.Valid {
		out.ApprovalID = g.ApprovalID.UUID.String()
	}
	return out
}

// apiListGrants handles "GET /api/v1/grants[?conversation_id=|notebook_id=][&all=true][&active=true]":
// the caller's grants (those they gave and those over their calls), or
// every one of the workspace for an admin with all=true.
func (s *Server) apiListGrants(c echo.Context) error {
	f, err := grantFilter(c)
	if err != nil {
		return err
	}
	f.LiveOnly = c.QueryParam("active") == "true"
	list, next, err := s.props.Grants().List(c.Request().Context(), principal(c), f)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]grantJSON, len(list))
	for i, g := range list {
		out[i] = toGrantJSON(g, now)
	}
	answer := map[string]any{"grants": out}
	if next != "" {
		answer["next_cursor"] = next
	}
	return c.JSON(http.StatusOK, answer)
}

// apiCreateGrant handles "POST /api/v1/grants": the caller's own grant
// over their conversation, notebook or token, or (with approval_id) an
// approver's grant extending a packet they approved. Bad input is 4xx
// naming the field, and nothing is written.
func (s *Server) apiCreateGrant(c echo.Context) error {
	var in struct {
		Tool            string          `json:"tool"`
		ActionClass     string          `json:"action_class"`
		ConversationID  *string         `json:"conversation_id"`
		NotebookID      *string         `json:"notebook_id"`
		TokenID         *string         `json:"token_id"`
		ApprovalID      *string         `json:"approval_id"`
		Bounds          json.RawMessage `json:"bounds"`
		DurationMinutes int             `json:"duration_minutes"`
		MaxCalls        int             `json:"max_calls"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r := grants.Request{Tool: strings.TrimSpace(in.Tool), ActionClass: strings.TrimSpace(in.ActionClass), Minutes: in.DurationMinutes, Calls: in.MaxCalls}
	for _, id := range []struct {
		name string
		v    *string
		dst  *uuid.NullUUID
	}{{"conversation_id", in.ConversationID, &r.ConversationID}, {"notebook_id", in.NotebookID, &r.NotebookID},
		{"token_id", in.TokenID, &r.TokenID}, {"approval_id", in.ApprovalID, &r.ApprovalID}} {
		if id.v == nil {
			continue
		}
		u, err := uuid.Parse(*id.v)
		if err != nil {
			return apperr.Invalid("The "+id.name+" must be an id; nothing was done.", apperr.FieldError{Field: id.name, Message: "must be an id"})
		}
		*id.dst = uuid.NullUUID{UUID: u, Valid: true}
	}
	if len(in.Bounds) > 0 && string(in.Bounds) != "null" {
		bounds, err := constraintsFromJSON([]byte(`{"constraints":` + string(in.Bounds) + `}`))
		if err != nil {
			return renameField(err, "constraints", "bounds")
		}
		r.Bounds = bounds
	}
	g, err := s.props.Grants().Create(c.Request().Context(), principal(c), r)
	if err != nil {
		return err
	}
	s.announceGrant(c, g)
	return c.JSON(http.StatusCreated, toGrantJSON(g, time.Now()))
}

// apiRevokeGrant handles "POST /api/v1/grants/:id/revoke" (an optional
// JSON body with a reason, kept in the audit log).
func (s *Server) apiRevokeGrant(c echo.Context) error {
	id, err := pathID(c, grants.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	if utf8.RuneCountInString(in.Reason) > 500 {
		return apperr.Invalid("The reason must have at most 500 characters.", apperr.FieldError{Field: "reason", Message: "must have at most 500 characters"})
	}
	g, err := s.props.Grants().Revoke(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	s.announceGrant(c, g)
	return c.JSON(http.StatusOK, toGrantJSON(g, time.Now()))
}

// announceGrant tells the live pages where a grant applies that it
// changed: its header's count reloads with the page's feed.
func (s *Server) announceGrant(c echo.Context, g grants.Grant) {
	ws := principal(c).WorkspaceID
	switch g.Scope {
	case grants.ScopeConversation:
		s.announce(ws, events.Conversation(g.ScopeID))
	case grants.ScopeNotebook:
		s.announce(ws, events.Notebook(g.ScopeID))
	}
	s.announce(ws, events.User(g.OwnerID))
}

// renameField names a constraint error by the request's field (bounds.0
// rather than constraints.0).
func renameField(err error, from, to string) error {
	ae, ok := err.(*apperr.Error)
	if !ok {
		return err
	}
	out := *ae
	out.Fields = make([]apperr.FieldError, len(ae.Fields))
	for i, f := range ae.Fields {
		f.Field = strings.Replace(f.Field, from, to, 1)
		out.Fields[i] = f
	}
	out.Message = strings.ReplaceAll(out.Message, "Constraint ", "Bound ")
	return &out
}
