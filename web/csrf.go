package web

import (
	"crypto/rand"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// csrfCookieMaxAge is how long a CSRF token cookie lives (echo's default).
const csrfCookieMaxAge = 24 * time.Hour

// cookieName prefixes name with __Host- when cookies are Secure: a browser
// then takes the cookie only from a secure origin, for this host alone (no
// Domain) and the whole site (Path=/), so a sibling subdomain or a
// plain-HTTP attacker cannot plant or shadow it.
func cookieName(name string, secure bool) string {
	if secure {
		return "__Host-" + name
	}
	return name
}

// csrfConfig is the CSRF protection of the browser pages: Fetch-Metadata
// (Sec-Fetch-Site) first, a double-submit token in a cookie as fallback.
// It skips nothing: a request authenticated by bearer token never reaches
// it (see bearerOr), and any other request gets the browser's protections.
func (s *Server) csrfConfig() middleware.CSRFConfig {
	return middleware.CSRFConfig{
		TokenLookup:    "header:X-CSRF-Token,form:_csrf",
		CookieName:     cookieName("gatehouse_csrf", s.cfg.CookieSecure),
		CookiePath:     "/",
		CookieMaxAge:   int(csrfCookieMaxAge.Seconds()),
		CookieHTTPOnly: true,
		CookieSecure:   s.cfg.CookieSecure,
		CookieSameSite: http.SameSiteLaxMode,
	}
}

// rotateCSRF gives the client a new CSRF token (at sign-in and sign-out),
// so a token planted or read before (login CSRF, a shared machine) is
// worth nothing afterwards. It replaces the cookie the middleware set for
// this response, if any, with one carrying the new token.
func (s *Server) rotateCSRF(c echo.Context) {
	cfg := s.csrfConfig()
	h := c.Response().Header()
	old := h.Values(echo.HeaderSetCookie)
	h.Del(echo.HeaderSetCookie)
	for _, v := range old {
		if !strings.HasPrefix(v, cfg.CookieName+"=") {
			h.Add(echo.HeaderSetCookie, v)
		}
	}
	c.SetCookie(&http.Cookie{
		Name: cfg.CookieName, Value: rand.Text(), Path: cfg.CookiePath,
		Expires: time.Now().Add(csrfCookieMaxAge), MaxAge: cfg.CookieMaxAge,
		Secure: cfg.CookieSecure, HttpOnly: cfg.CookieHTTPOnly, SameSite: cfg.CookieSameSite,
	})
}
