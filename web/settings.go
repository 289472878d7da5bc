package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/settings"
	"github.com/gatehouse/gatehouse/views"
)

// settingsPage handles "GET /admin/settings" (admins).
func (s *Server) settingsPage(c echo.Context) error {
	st, err := s.settings.Get(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	v := views.SettingsView{AutoApproveHighRisk: st.AutoApproveHighRisk, InternalDomains: strings.Join(st.InternalDomains, "\n"),
		WebhookAllowlist: strings.Join(st.WebhookAllowlist, "\n"), Saved: c.QueryParam("saved") == "1"}
	return render(c, http.StatusOK, views.SettingsPage(s.shell(c, "Settings", "admin"), v))
}

// saveSettings handles "POST /admin/settings"; bad input re-renders the
// form as typed, with the field named.
func (s *Server) saveSettings(c echo.Context) error {
	internal, webhook := c.FormValue("internal_domains"), c.FormValue("webhook_allowlist")
	next := settings.Settings{AutoApproveHighRisk: c.FormValue("auto_approve_high_risk") != ""}
	var errs []error
	var err error
	if next.InternalDomains, err = settings.Domains("internal_domains", internal); err != nil {
		errs = append(errs, err)
	}
	if next.WebhookAllowlist, err = settings.Domains("webhook_allowlist", webhook); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if _, err := s.settings.Update(c.Request().Context(), principal(c), next); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/admin/settings?saved=1")
	}
	v := views.SettingsView{AutoApproveHighRisk: next.AutoApproveHighRisk, InternalDomains: internal, WebhookAllowlist: webhook,
		Error: "Nothing was saved; fix the fields below.", Fields: map[string]string{}}
	for _, e := range errs {
		var ae *apperr.Error
		if errors.As(e, &ae) {
			for _, f := range ae.Fields {
				v.Fields[f.Field] = f.Message
			}
		}
	}
	return render(c, http.StatusUnprocessableEntity, views.SettingsPage(s.shell(c, "Settings", "admin"), v))
}
