package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/views"
)

// upstreamsPage handles "GET /admin/upstreams": the MCP servers behind the
// gate, their tools, their pins and what changed (approvers and admins;
// admins accept).
func (s *Server) upstreamsPage(c echo.Context) error {
	return s.renderUpstreams(c, http.StatusOK, nil)
}

// renderUpstreams renders /admin/upstreams, with a refused accept's form
// (the reason typed, the message next to it) when there is one.
func (s *Server) renderUpstreams(c echo.Context, status int, refused *views.AcceptForm) error {
	all, err := s.upstreams.Status(c.Request().Context())
	if err != nil {
		return err
	}
	v := views.UpstreamsView{CanAccept: principal(c).IsAdmin(), Upstreams: upstreamItems(all), Refused: refused}
	switch {
	case c.QueryParam("accepted") != "":
		v.Notice = "Accepted " + c.QueryParam("accepted") + ": it can be called again."
	case c.QueryParam("refreshed") != "":
		v.Notice = "Listed the tools of " + c.QueryParam("refreshed") + " again."
	}
	return render(c, status, views.UpstreamsPage(s.shell(c, "Upstreams", "admin"), v))
}

// upstreamItems are the page's view of the upstreams.
func upstreamItems(all []mcp.UpstreamStatus) []views.UpstreamItem {
	items := make([]views.UpstreamItem, len(all))
	for i, u := range all {
		it := views.UpstreamItem{Name: u.Name, Endpoint: u.Endpoint, Transport: u.Transport, Headers: strings.Join(u.HeaderNames, ", "),
			Timeout: u.Timeout.String(), Problem: u.Problem, Available: u.Available}
		if !u.ListedAt.IsZero() {
			it.ListedAt = u.ListedAt.UTC().Format(time.RFC3339)
		}
		for _, t := range u.Tools {
			ti := views.UpstreamToolItem{Upstream: t.Upstream, Name: t.Name, Declared: t.Declared, Status: t.Status, Problem: t.Problem,
				Description: t.Description, Hash: t.Hash, AcceptedHash: t.AcceptedHash, AcceptedBy: t.AcceptedBy, Changed: t.Changed}
			if t.AcceptedAt != nil {
				ti.AcceptedAt = t.AcceptedAt.UTC().Format(time.RFC3339)
			}
			for _, l := range t.Diff {
				ti.Diff = append(ti.Diff, [2]string{l.Op, l.Text})
			}
			it.Tools = append(it.Tools, ti)
		}
		items[i] = it
	}
	return items
}

// acceptUpstreamTool handles "POST /admin/upstreams/:upstream/tools/:tool/accept"
// (admins): accept the definition reviewed (form field hash) for a reason
// (form field reason, 10 to 500 characters); audited and receipted with
// the reason. A refused reason re-renders the page with 422 and the
// message next to the field (problem+json for an API caller).
func (s *Server) acceptUpstreamTool(c echo.Context) error {
	hash := strings.TrimSpace(c.FormValue("hash"))
	if hash == "" {
		return apperr.Invalid("Say which definition you accept.", apperr.FieldError{Field: "hash", Message: "is required"})
	}
	upstream, tool, reason := c.Param("upstream"), c.Param("tool"), c.FormValue("reason")
	if err := s.upstreams.Accept(c.Request().Context(), principal(c), upstream, tool, hash, reason); err != nil {
		var ae *apperr.Error
		if wantsJSON(c) || !errors.As(err, &ae) || ae.Code != apperr.EINVALID {
			return err
		}
		form := &views.AcceptForm{Declared: upstream + "." + tool, Reason: reason, Message: ae.Message}
		for _, f := range ae.Fields {
			if f.Field == "reason" {
				form.ReasonError = f.Message
			}
		}
		return s.renderUpstreams(c, http.StatusUnprocessableEntity, form)
	}
	if wantsJSON(c) {
		return c.JSON(http.StatusOK, map[string]any{"upstream": upstream, "tool": tool, "status": "accepted", "hash": hash})
	}
	return c.Redirect(http.StatusSeeOther, "/admin/upstreams?accepted="+upstream+"."+tool)
}

// refreshUpstream handles "POST /admin/upstreams/:upstream/refresh"
// (admins): list the upstream's tools again; a changed definition is held.
func (s *Server) refreshUpstream(c echo.Context) error {
	if !principal(c).IsAdmin() {
		return apperr.Errorf(apperr.EFORBIDDEN, "Only an admin lists an upstream's tools again.")
	}
	upstream := c.Param("upstream")
	if err := s.upstreams.RefreshOne(c.Request().Context(), upstream); err != nil {
		return err
	}
	if wantsJSON(c) {
		return c.JSON(http.StatusOK, map[string]any{"upstream": upstream, "refreshed": true})
	}
	return c.Redirect(http.StatusSeeOther, "/admin/upstreams?refreshed="+upstream)
}
