package web

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// A bearer token is a script's credential, a session cookie a browser's.
// A request is one or the other: only a request that carries a valid
// bearer token and no session cookie passes without the browser's
// protections (CSRF, Fetch-Metadata), and it is answered in JSON.

// errBearerAndSession refuses a request that carries both credentials: it
// might be a browser whose page added a header, so it may not pass as a
// script, and it is not plainly a browser either.
var errBearerAndSession = apperr.Errorf(apperr.EBADREQ, "Send a bearer token or a session cookie, not both.")

// bearerToken returns the token of an "Authorization: Bearer" header (the
// scheme is case-insensitive) and whether there is one.
func bearerToken(c echo.Context) (string, bool) {
	scheme, token, ok := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// authenticateBearer resolves a bearer token to its principal. A token
// bound to a resource (an OAuth grant's, RFC 8707) is refused anywhere
// but there, as if it were unknown: a token for this /mcp is not one for
// the REST API, nor for another server.
func (s *Server) authenticateBearer(c echo.Context, token string) (auth.Principal, error) {
	p, err := s.auth.AuthenticateToken(c.Request().Context(), token)
	if err != nil {
		return auth.Principal{}, err
	}
	if !s.audienceAllowed(c, p.Audience) {
		return auth.Principal{}, auth.ErrBadToken
	}
	return p, nil
}

// hasBearer reports whether the request carries a bearer token, valid or
// not: its caller is a script, answered in JSON (problem+json for errors)
// whatever it accepts.
func hasBearer(c echo.Context) bool {
	_, ok := bearerToken(c)
	return ok
}

// hasSessionCookie reports whether the request carries a session cookie,
// live or not.
func (s *Server) hasSessionCookie(c echo.Context) bool {
	ck, err := c.Cookie(s.sessions.Cookie.Name)
	return err == nil && ck.Value != ""
}

// oneCredential refuses a request with both a bearer token and a session
// cookie, and makes a request with a bearer token ask for JSON, so the
// handlers and the error handler answer it in JSON.
func (s *Server) oneCredential(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !hasBearer(c) {
			return next(c)
		}
		c.Request().Header.Set(echo.HeaderAccept, echo.MIMEApplicationJSON)
		if s.hasSessionCookie(c) {
			return errBearerAndSession
		}
		return next(c)
	}
}
