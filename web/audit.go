package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/views"
)

// auditPage handles "GET /audit": the audit log, newest first, filtered by
// the URL's actor, action, object, from and to, 50 rows a page (before:
// the keyset cursor). Admins read the workspace's log, everyone else the
// rows about their own scopes and calls and their own actions. Filters
// that cannot be read come back with a message next to the field (422).
func (s *Server) auditPage(c echo.Context) error {
	p := principal(c)
	f := audit.Filter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"), Object: c.QueryParam("object"),
		From: c.QueryParam("from"), To: c.QueryParam("to"), Before: c.QueryParam("before")}
	v := views.AuditView{Actor: f.Actor, Action: f.Action, Object: f.Object, From: f.From, To: f.To, All: p.IsAdmin()}
	page, err := audit.List(c.Request().Context(), s.q, audit.Viewer{WorkspaceID: p.WorkspaceID, UserID: p.UserID, Admin: p.IsAdmin()}, f)
	if apperr.Code(err) == apperr.EINVALID {
		v.Error = apperr.Message(err)
		v.Fields = map[string]string{}
		if ae, ok := err.(*apperr.Error); ok {
			for _, fe := range ae.Fields {
				v.Fields[fe.Field] = fe.Message
			}
		}
		return render(c, http.StatusUnprocessableEntity, views.AuditPage(s.shell(c, "Audit log", "audit"), v))
	}
	if err != nil {
		return err
	}
	for _, e := range page.Entries {
		v.Rows = append(v.Rows, views.AuditRow{ID: strconv.FormatInt(e.ID, 10), When: e.CreatedAt,
			Actor: auditActor(e), Action: e.Action, Subject: e.SubjectType + " " + e.SubjectID,
			SubjectURL: "/audit?object=" + url.QueryEscape(e.SubjectID), Data: clip.Ellipsis(string(e.Data), 300)})
	}
	q := url.Values{}
	for k, val := range map[string]string{"actor": f.Actor, "action": f.Action, "object": f.Object, "from": f.From, "to": f.To} {
		if val != "" {
			q.Set(k, val)
		}
	}
	if f.Before != "" {
		v.FirstURL = "/audit?" + q.Encode()
	}
	if page.Next != 0 {
		q.Set("before", strconv.FormatInt(page.Next, 10))
		v.NextURL = "/audit?" + q.Encode()
	}
	return render(c, http.StatusOK, views.AuditPage(s.shell(c, "Audit log", "audit"), v))
}

// auditActor says who acted: a person, an agent's token (for whom), or
// Gatehouse itself.
func auditActor(e audit.Entry) string {
	switch {
	case e.ActorKind == "system" || e.ActorEmail == "":
		return "Gatehouse"
	case e.ActorKind == "agent" && e.TokenName != "":
		return "agent " + e.TokenName + " (for " + e.ActorEmail + ")"
	case e.TokenName != "":
		return e.ActorEmail + " (token " + e.TokenName + ")"
	}
	return e.ActorEmail
}
