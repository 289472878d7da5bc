package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/oauth"
	"github.com/gatehouse/gatehouse/views"
)

// tokensPage handles "GET /tokens": the user's tokens, the form that
// creates one and, for admins, every token of the workspace.
func (s *Server) tokensPage(c echo.Context) error {
	return s.renderTokens(c, http.StatusOK, views.TokensView{})
}

// createToken handles "POST /tokens" (form fields name, kind, expires_on
// (a date, optional), tools (repeated, optional) and read_only). The new
// token is shown on the page this answer renders, once: unlike other
// forms it does not redirect, so its secret never rests in the session
// store. Bad input re-renders the form as typed with 422.
func (s *Server) createToken(c echo.Context) error {
	form := views.TokenForm{Name: c.FormValue("name"), Kind: c.FormValue("kind"), ExpiresOn: strings.TrimSpace(c.FormValue("expires_on")),
		ReadOnly: c.FormValue("read_only") != ""}
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	form.Tools = values["tools"]
	nt := auth.NewToken{Kind: auth.TokenKind(form.Kind), Name: form.Name, ReadOnly: form.ReadOnly}
	fields := map[string]string{}
	if form.ExpiresOn != "" {
		day, err := time.Parse(time.DateOnly, form.ExpiresOn)
		if err != nil {
			fields["expires_at"] = "must be a date (YYYY-MM-DD)"
		}
		// The token works through the day it expires on.
		end := day.AddDate(0, 0, 1)
		nt.ExpiresAt = &end
	}
	if len(form.Tools) > 0 {
		nt.Tools = form.Tools
		for _, t := range form.Tools {
			if _, ok := s.registry.Get(t); !ok {
				fields["tools"] = "must be tools of this workspace"
			}
		}
	}
	if len(fields) > 0 {
		return s.renderTokens(c, http.StatusUnprocessableEntity, views.TokensView{Form: form, Fields: fields})
	}
	secret, tok, err := s.auth.IssueToken(c.Request().Context(), principal(c), nt)
	if apperr.Code(err) == apperr.EINVALID {
		return s.renderTokens(c, http.StatusUnprocessableEntity, views.TokensView{Form: form, Fields: fieldErrors(err)})
	}
	if err != nil {
		return err
	}
	return s.renderTokens(c, http.StatusCreated, views.TokensView{Created: &views.CreatedToken{Name: tok.Name, Secret: secret}})
}

// revokeToken handles "POST /tokens/:id/revoke": the user's own token, or
// any token of the workspace for admins. A token already revoked (a stale
// page) re-renders the page with the message.
func (s *Server) revokeToken(c echo.Context) error {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return apperr.Errorf(apperr.ENOTFOUND, "No live token has that id.")
	}
	err = s.auth.RevokeTokenAs(c.Request().Context(), principal(c), id)
	if apperr.Code(err) == apperr.ENOTFOUND {
		return s.renderTokens(c, http.StatusNotFound, views.TokensView{Error: apperr.Message(err)})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/tokens")
}

func (s *Server) renderTokens(c echo.Context, status int, v views.TokensView) error {
	ctx := c.Request().Context()
	p := principal(c)
	mine, err := s.auth.ListTokens(ctx, p, false)
	if err != nil {
		return err
	}
	var all []auth.Token
	if p.IsAdmin() && !p.IsAgent() {
		if all, err = s.auth.ListTokens(ctx, p, true); err != nil {
			return err
		}
	}
	// OAuth grants are agent tokens too: their client and access token's
	// expiry are shown with them.
	var ids []uuid.UUID
	for _, t := range slices.Concat(mine, all) {
		ids = append(ids, t.ID)
	}
	grants, err := s.oauthService().Grants(ctx, ids)
	if err != nil {
		return err
	}
	now := time.Now()
	v.Mine = tokenRows(mine, grants, now)
	if all != nil {
		v.All = tokenRows(all, grants, now)
	}
	for _, t := range s.registry.List() {
		v.Tools = append(v.Tools, t.Name)
	}
	slices.Sort(v.Tools)
	if v.Form.Kind == "" {
		v.Form.Kind = string(auth.TokenAgent)
	}
	return render(c, status, views.TokensPage(s.shell(c, "API tokens", "tokens"), v))
}

func tokenRows(tokens []auth.Token, grants map[uuid.UUID]oauth.Grant, now time.Time) []views.TokenRow {
	day := func(t *time.Time, none string) string {
		if t == nil {
			return none
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	}
	rows := make([]views.TokenRow, 0, len(tokens))
	for _, t := range tokens {
		scope := "every tool"
		if t.Tools != nil {
			scope = "tools: " + strings.Join(t.Tools, ", ")
			if len(t.Tools) == 0 {
				scope = "no tools"
			}
		}
		if t.ReadOnly {
			scope += ", read-only"
		}
		if t.Connector {
			scope += " (connector)"
		}
		status := "live"
		switch {
		case t.RevokedAt != nil:
			status = "revoked " + day(t.RevokedAt, "")
		case !t.Live(now):
			status = "expired"
		}
		row := views.TokenRow{ID: t.ID.String(), Name: t.Name, Kind: string(t.Kind), Owner: t.Email,
			Created: day(&t.CreatedAt, ""), LastUsed: day(t.LastUsedAt, "never"), ExpiresOn: day(t.ExpiresAt, "never"),
			Scope: scope, Status: status, CanRevoke: t.RevokedAt == nil}
		if g, ok := grants[t.ID]; ok {
			row.OAuth = &views.TokenOAuth{Client: g.ClientName, Hosts: strings.Join(g.RedirectHosts, ", "), AccessExpires: day(g.AccessExpiresAt, "")}
			switch {
			case g.ConversationTitle != "":
				row.OAuth.Binding = "conversation “" + g.ConversationTitle + "”"
			case g.NotebookTitle != "":
				row.OAuth.Binding = "notebook “" + g.NotebookTitle + "”"
			default:
				row.OAuth.Binding = "a new conversation per session"
			}
		}
		rows = append(rows, row)
	}
	return rows
}
