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

// adminPage handles "GET /admin".
func (s *Server) adminPage(c echo.Context) error {
	rows, err := s.q.ListMembers(c.Request().Context(), principal(c).WorkspaceID)
	if err != nil {
		return err
	}
	members := make([]views.Member, len(rows))
	for i, r := range rows {
		members[i] = views.Member{Email: r.Email, Role: r.Role, Since: r.CreatedAt.Format("2006-01-02")}
	}
	return render(c, http.StatusOK, views.AdminPage(s.shell(c, "Admin", "admin"), members))
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
