package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/views"
)

// grantApproverRole handles "POST /admin/approver-roles" (admins; form
// fields email and role). Bad input re-renders the admin page with the
// form as typed and the message next to its field.
func (s *Server) grantApproverRole(c echo.Context) error {
	form := views.RoleForm{Email: c.FormValue("email"), Role: c.FormValue("role")}
	err := s.auth.GrantApproverRole(c.Request().Context(), principal(c), form.Email, form.Role)
	if err == nil {
		return c.Redirect(http.StatusSeeOther, "/admin")
	}
	v := views.AdminView{Grant: form, Fields: fieldErrors(err)}
	switch apperr.Code(err) {
	case apperr.EINVALID:
		return s.renderAdmin(c, http.StatusUnprocessableEntity, v)
	case apperr.ECONFLICT: // the member holds the role already
		v.Fields["role"] = apperr.Message(err)
		return s.renderAdmin(c, http.StatusConflict, v)
	}
	return err
}

// revokeApproverRole handles "POST /admin/approver-roles/revoke" (admins;
// form fields email and role). A role the member no longer holds (a stale
// page) re-renders the page with the message.
func (s *Server) revokeApproverRole(c echo.Context) error {
	err := s.auth.RevokeApproverRole(c.Request().Context(), principal(c), c.FormValue("email"), c.FormValue("role"))
	if err == nil {
		return c.Redirect(http.StatusSeeOther, "/admin")
	}
	switch apperr.Code(err) {
	case apperr.EINVALID:
		return s.renderAdmin(c, http.StatusUnprocessableEntity, views.AdminView{Error: apperr.Message(err)})
	case apperr.ECONFLICT:
		return s.renderAdmin(c, http.StatusConflict, views.AdminView{Error: apperr.Message(err)})
	}
	return err
}
