package web

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/views"
)

// signInPage handles "GET /signin".
func (s *Server) signInPage(c echo.Context) error {
	return render(c, http.StatusOK, views.SignInPage(s.shell(c, "Sign in", ""), views.SignInForm{Next: safeRedirect(c.QueryParam("next"))}))
}

// signIn handles "POST /signin".
func (s *Server) signIn(c echo.Context) error {
	form := views.SignInForm{Email: c.FormValue("email"), Next: safeRedirect(c.FormValue("next"))}
	ctx := c.Request().Context()
	p, err := s.auth.SignIn(ctx, form.Email, c.FormValue("password"), c.RealIP())
	switch apperr.Code(err) {
	case apperr.EUNAUTH:
		form.Error = apperr.Message(err)
		return render(c, http.StatusUnprocessableEntity, views.SignInPage(s.shell(c, "Sign in", ""), form))
	case apperr.ERATELIMIT:
		form.Error = apperr.Message(err)
		var ae *apperr.Error
		if errors.As(err, &ae) {
			if secs, ok := ae.Extra["retry_after"].(int); ok {
				c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			}
		}
		return render(c, http.StatusTooManyRequests, views.SignInPage(s.shell(c, "Sign in", ""), form))
	}
	if err != nil {
		return err
	}
	// A new session id on sign-in defeats session fixation.
	if err := s.sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.sessions.Put(ctx, sessionUserID, p.UserID.String())
	// A password reset after this moment ends the session (requireUser).
	s.sessions.Put(ctx, sessionSignedInAt, time.Now().UnixMicro())
	s.rotateCSRF(c)
	return c.Redirect(http.StatusSeeOther, form.Next)
}

// signOut handles "POST /signout".
func (s *Server) signOut(c echo.Context) error {
	if err := s.sessions.Destroy(c.Request().Context()); err != nil {
		return err
	}
	s.rotateCSRF(c)
	return c.Redirect(http.StatusSeeOther, "/signin")
}
