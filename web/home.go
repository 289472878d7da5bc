package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// homePage handles "GET /": what needs the signed-in user.
func (s *Server) homePage(c echo.Context) error {
	ws, err := s.q.GetWorkspace(c.Request().Context(), principal(c).WorkspaceID)
	if err != nil {
		return err
	}
	needs, err := s.homeNeeds(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.HomePage(s.shell(c, "Home", ""), views.HomeView{WorkspaceName: ws.Name, Needs: needs}))
}

// homeLive handles "GET /home/live": the home page's live feed re-renders
// what needs the user, and the header's count, from the database.
func (s *Server) homeLive(c echo.Context) error {
	needs, err := s.homeNeeds(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.HomeUpdate(needs, s.navCounts(c)))
}

// homeNeeds reads what waits for the user into the home page's model.
func (s *Server) homeNeeds(c echo.Context) (views.HomeNeeds, error) {
	p := principal(c)
	w, err := s.props.Waiting(c.Request().Context(), p)
	if err != nil {
		return views.HomeNeeds{}, err
	}
	n := views.HomeNeeds{CanResolve: p.CanResolveSome()}
	for _, card := range w.Cards {
		by := "you"
		if card.ProposedBy == "agent" {
			by = "agent " + card.TokenName
		}
		n.Cards = append(n.Cards, views.HomeCard{Tool: card.Tool, Effect: card.Effect, Risk: card.Risk, ScopeTitle: card.ScopeTitle,
			ScopeKind: string(card.Scope.Kind), By: by, When: card.CreatedAt,
			URL: scopeURL(card.Scope) + "#proposal-" + card.ID.String()})
	}
	for _, pk := range w.Packets {
		n.Packets = append(n.Packets, views.HomePacket{Summary: pk.Summary, Tool: pk.Tool, Risk: pk.Risk, Effect: pk.Effect, ScopeTitle: pk.ScopeTitle,
			ApproverRole: pk.ApproverRole, Expires: pk.ExpiresAt, URL: "/admin/approvals/" + pk.ID.String()})
	}
	for _, o := range w.Outcomes {
		when := o.CreatedAt
		if o.ResolvedAt != nil {
			when = *o.ResolvedAt
		}
		n.Outcomes = append(n.Outcomes, views.HomeOutcome{Tool: o.Tool, Status: o.Status, Token: o.TokenName, ScopeTitle: o.ScopeTitle,
			When: when, URL: scopeURL(o.Scope) + "#proposal-" + o.ID.String(),
			AuditURL: "/audit?object=" + o.ID.String()})
	}
	return n, nil
}

// scopeURL is the page of a conversation or notebook.
func scopeURL(sc proposals.Scope) string {
	if sc.Kind == proposals.ScopeNotebook {
		return "/notebooks/" + sc.ID.String()
	}
	return "/conversations/" + sc.ID.String()
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
	if v.Policy, err = s.policyStatus(c.Request().Context()); err != nil {
		return err
	}
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
