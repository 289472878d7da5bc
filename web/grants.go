package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/grants"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/views"
)

// Grants: "approve and allow similar for ..." (internal/grants). The
// choice is part of the approve forms of a card (applyProposal) and a
// packet (approveApproval); the grants page lists and revokes them, and
// each scope's header shows how many are live.

// grantRoutes registers the grants' pages and API (see routes.go).
func (s *Server) grantRoutes(e *echo.Echo) {
	csrf := middleware.CSRFWithConfig(s.csrfConfig())
	signedIn := []echo.MiddlewareFunc{noStore, s.oneCredential, s.loadSession, csrf, s.requireUser}
	e.GET("/grants", s.grantsPage, signedIn...)
	e.GET("/grants/badge", s.grantsBadge, signedIn...)
	e.POST("/grants/:id/revoke", s.revokeGrant, signedIn...)
	api := e.Group("/api/v1/grants", s.requireToken, s.validateAPIRequest)
	api.GET("", s.apiListGrants)
	api.POST("", s.apiCreateGrant)
	api.POST("/:id/revoke", s.apiRevokeGrant)
}

// grantsFormChosen reports whether an approve form asks for a grant too.
func grantsFormChosen(form url.Values) bool {
	return form.Get("grant") == "1" || form.Get("grant") == "on"
}

// grantFormFields are the "allow similar" fields an approve form may carry.
var grantFormFields = []string{"grant", "grant_for", "grant_scope", "grant_minutes", "grant_calls",
	"grant_max_amount", "grant_recipient_allowlist", "grant_domain_allowlist", "grant_internal_only"}

// grantChoiceFromForm reads the "allow similar" part of an approve form;
// a value that cannot be read is refused naming its field.
func grantChoiceFromForm(form url.Values) (grants.Choice, error) {
	c := grants.Choice{For: form.Get("grant_for"), Where: form.Get("grant_scope")}
	if c.For == "" {
		c.For = grants.ForTool
	}
	if c.Where == "" {
		c.Where = grants.WhereHere
	}
	number := func(field string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(form.Get(field)))
		if err != nil {
			return 0, apperr.Invalid(fmt.Sprintf("The grant's %s must be a whole number; nothing was done.", field),
				apperr.FieldError{Field: field, Message: "must be a whole number"})
		}
		return n, nil
	}
	var err error
	if c.Minutes, err = number("grant_minutes"); err != nil {
		return grants.Choice{}, err
	}
	if c.Calls, err = number("grant_calls"); err != nil {
		return grants.Choice{}, err
	}
	list := func(v string) []string {
		return slices.DeleteFunc(strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' }), func(v string) bool { return v == "" })
	}
	if v := strings.TrimSpace(form.Get("grant_max_amount")); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n > 0) || n > 1e15 {
			return grants.Choice{}, apperr.Invalid("The grant's max amount must be a positive number; nothing was done.",
				apperr.FieldError{Field: "grant_max_amount", Message: "must be a positive number"})
		}
		c.Bounds = append(c.Bounds, policy.Constraint{Kind: policy.ConstraintMaxAmount, Amount: n})
	}
	for _, kind := range []string{policy.ConstraintRecipientAllowlist, policy.ConstraintDomainAllowlist} {
		if v := list(form.Get("grant_" + kind)); len(v) > 0 {
			c.Bounds = append(c.Bounds, policy.Constraint{Kind: kind, Values: v})
		}
	}
	if form.Get("grant_internal_only") != "" {
		c.Bounds = append(c.Bounds, policy.Constraint{Kind: policy.ConstraintInternalOnly})
	}
	return c, c.Validate()
}

// grantsChanged tells the page that a grant changed, so its header's
// count reloads (GrantsBadge).
func grantsChanged(c echo.Context) { c.Response().Header().Set("HX-Trigger", "grants-changed") }

// grantsPage handles "GET /grants[?conversation_id=|notebook_id=][&all=1][&show=all]".
func (s *Server) grantsPage(c echo.Context) error {
	return s.renderGrants(c, http.StatusOK, "")
}

func (s *Server) renderGrants(c echo.Context, status int, message string) error {
	p := principal(c)
	f, err := grantFilter(c)
	if err != nil {
		return err
	}
	f.LiveOnly = c.QueryParam("show") != "all"
	list, next, err := s.props.Grants().List(c.Request().Context(), p, f)
	if err != nil {
		return err
	}
	v := views.GrantsView{All: f.All, CanSeeAll: p.IsAdmin(), LiveOnly: f.LiveOnly, Error: message}
	if next != "" {
		q := c.QueryParams()
		q.Set("cursor", next)
		v.OlderURL = "/grants?" + q.Encode()
	}
	now := time.Now()
	for _, g := range list {
		v.Items = append(v.Items, grantItem(g, now, g.GrantedBy == p.UserID || g.OwnerID == p.UserID || p.IsAdmin()))
	}
	switch {
	case f.ConversationID.Valid:
		v.Filter = "this conversation"
	case f.NotebookID.Valid:
		v.Filter = "this notebook"
	}
	return render(c, status, views.GrantsPage(s.shell(c, "Grants", ""), v))
}

// grantFilter reads the grants' query: a scope, all (admins).
func grantFilter(c echo.Context) (grants.ListFilter, error) {
	var f grants.ListFilter
	for _, q := range []struct {
		name string
		dst  *uuid.NullUUID
	}{{"conversation_id", &f.ConversationID}, {"notebook_id", &f.NotebookID}} {
		if v := c.QueryParam(q.name); v != "" {
			id, err := uuid.Parse(v)
			if err != nil {
				return f, apperr.Invalid("The "+q.name+" must be an id.", apperr.FieldError{Field: q.name, Message: "must be an id"})
			}
			*q.dst = uuid.NullUUID{UUID: id, Valid: true}
		}
	}
	switch c.QueryParam("all") {
	case "", "0", "false":
	case "1", "true":
		f.All = true
	default:
		return f, apperr.Invalid("The all parameter must be true or false.", apperr.FieldError{Field: "all", Message: "must be true or false"})
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > grants.MaxLimit {
			return f, apperr.Invalid(fmt.Sprintf("The limit must be from 1 to %d.", grants.MaxLimit),
				apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be from 1 to %d", grants.MaxLimit)})
		}
		f.Limit = n
	}
	f.Cursor = c.QueryParam("cursor")
	return f, nil
}

// grantItem is a grant as the page shows it.
func grantItem(g grants.Grant, now time.Time, canRevoke bool) views.GrantItem {
	it := views.GrantItem{ID: g.ID.String(), Subject: g.Subject(), GrantedBy: g.GrantedByEmail, Owner: g.OwnerEmail,
		Bounds: boundsWords(g.Bounds), Remaining: g.Remaining, MaxCalls: g.MaxCalls, Expires: g.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"),
		Status: g.Status(now)}
	it.CanRevoke = canRevoke && it.Status == grants.StatusActive
	switch g.Scope {
	case grants.ScopeConversation:
		it.Where, it.WhereURL = "conversation “"+g.ScopeTitle+"”", "/conversations/"+g.ScopeID.String()
	case grants.ScopeNotebook:
		it.Where, it.WhereURL = "notebook “"+g.ScopeTitle+"”", "/notebooks/"+g.ScopeID.String()
	default:
		it.Where = "token “" + g.TokenName + "”"
	}
	if g.Ceiling == string(policy.StateDeferred) {
		it.StandsFor = "a packet for the " + g.ApproverRole + " role"
	} else {
		it.StandsFor = "the owner's card (" + g.OwnerEmail + ")"
	}
	return it
}

// boundsWords says a grant's bounds in a line ("none" without any).
func boundsWords(bs []policy.Constraint) string {
	if len(bs) == 0 {
		return "none"
	}
	var out []string
	for _, b := range bs {
		switch b.Kind {
		case policy.ConstraintMaxAmount:
			out = append(out, "amount at most "+strconv.FormatFloat(b.Amount, 'f', -1, 64))
		case policy.ConstraintInternalOnly:
			out = append(out, "internal only")
		default:
			out = append(out, strings.ReplaceAll(b.Kind, "_", " ")+": "+strings.Join(b.Values, ", "))
		}
	}
	return strings.Join(out, "; ")
}

// grantsBadge handles "GET /grants/badge?conversation_id=|notebook_id=":
// the scope header's count of live grants (views.GrantsBadge).
func (s *Server) grantsBadge(c echo.Context) error {
	f, err := grantFilter(c)
	if err != nil {
		return err
	}
	param, id := "conversation_id", f.ConversationID.UUID
	if f.NotebookID.Valid {
		param, id = "notebook_id", f.NotebookID.UUID
	} else if !f.ConversationID.Valid {
		return apperr.Invalid("Name the conversation_id or notebook_id.", apperr.FieldError{Field: "conversation_id", Message: "is required"})
	}
	n, err := s.props.Grants().CountLive(c.Request().Context(), principal(c), f.ConversationID, f.NotebookID)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.GrantsBadge(param, id.String(), n))
}

// revokeGrant handles "POST /grants/:id/revoke": the grant ends at once
// (on every instance: each decision reads it from the database).
func (s *Server) revokeGrant(c echo.Context) error {
	id, err := pathID(c, grants.ErrNotFound)
	if err != nil {
		return err
	}
	g, err := s.props.Grants().Revoke(c.Request().Context(), principal(c), id)
	if err != nil {
		code := apperr.Code(err)
		if code == apperr.EFORBIDDEN || code == apperr.ECONFLICT || code == apperr.ENOTFOUND {
			status := map[string]int{apperr.EFORBIDDEN: http.StatusForbidden, apperr.ECONFLICT: http.StatusConflict, apperr.ENOTFOUND: http.StatusNotFound}[code]
			return s.renderGrants(c, status, apperr.Message(err))
		}
		return err
	}
	s.announceGrant(c, g)
	grantsChanged(c)
	return c.Redirect(http.StatusSeeOther, "/grants")
}
