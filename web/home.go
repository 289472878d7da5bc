package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/views"
)

// homePage handles "GET /".
func (s *Server) homePage(c echo.Context) error {
	ws, err := s.q.GetWorkspace(c.Request().Context(), principal(c).WorkspaceID)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.HomePage(s.shell(c, "Home", ""), views.HomeView{WorkspaceName: ws.Name}))
}

// adminPage handles "GET /admin" (approvers and admins).
func (s *Server) adminPage(c echo.Context) error {
	return s.renderAdmin(c, http.StatusOK, views.AdminView{})
}

// renderAdmin renders the admin page: the members as they are now around
// the forms' state in v.
func (s *Server) renderAdmin(c echo.Context, status int, v views.AdminView) error {
	p := principal(c)
	members, err := s.auth.Members(c.Request().Context(), p.WorkspaceID)
	if err != nil {
		return err
	}
	v.Members = make([]views.Member, len(members))
	for i, m := range members {
		v.Members[i] = views.Member{Email: m.Email, Role: string(m.Role), Since: m.Since.Format("2006-01-02"), ApproverRoles: m.ApproverRoles}
	}
	v.CanManageRoles = p.IsAdmin() && !p.IsAgent()
	return render(c, status, views.AdminPage(s.shell(c, "Admin", "admin"), v))
}

// healthz handles "GET /healthz": the process is up.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz handles "GET /readyz": the database answers.
func (s *Server) readyz(c echo.Context) error {
	if err := s.ready(c.Request().Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "detail": "The database does not answer."})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}
