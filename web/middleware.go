package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/alexedwards/scs/v2"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/views"
)

const (
	principalKey  = "principal"
	sessionUserID = "user_id"
	// sessionSignedInAt is when the session signed in, in Unix
	// microseconds: a session older than its user's last password change
	// is refused.
	sessionSignedInAt = "signed_in_at"
	// sessionTouchedAt is when the session was last written (Unix
	// milliseconds): its idle deadline moves on at most every
	// sessionRefresh.
	sessionTouchedAt = "touched_at"
)

// logRequests writes one structured log line per request.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURIPath: true, LogMethod: true, LogLatency: true, LogRequestID: true,
		HandleError: true, // run the error handler first, so the status is the one sent
		Skipper:     func(c echo.Context) bool { return strings.HasPrefix(c.Request().URL.Path, "/static/") },
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			s.log.LogAttrs(c.Request().Context(), level, "request",
				slog.String("method", v.Method), slog.String("path", v.URIPath), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency), slog.String("request_id", v.RequestID))
			return nil
		},
	})(next)
}

// recoverPanics turns a panic into a logged internal error.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.Error("panic", "err", err, "stack", string(stack), "request_id", c.Response().Header().Get(echo.HeaderXRequestID))
			return err
		},
	})(next)
}

// loadSession loads the browser session and commits it just before the
// response is written, whatever wrote it (a handler or the error handler).
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var token string
		if ck, err := c.Cookie(s.sessions.Cookie.Name); err == nil {
			token = ck.Value
		}
		ctx, err := s.sessions.Load(c.Request().Context(), token)
		if err != nil {
			return err
		}
		loaded := s.sessionValues(ctx)
		c.SetRequest(c.Request().WithContext(ctx))
		c.Response().Header().Add("Vary", "Cookie")
		c.Response().Before(func() {
			ctx := c.Request().Context()
			switch s.sessions.Status(ctx) {
			case scs.Modified:
				if token != "" && s.sessions.Token(ctx) == token && s.sessionValues(ctx) == loaded && !s.sessionIdleDue(ctx) {
					// Only the idle deadline would move (scs marks every
					// loaded session modified when there is one): not
					// written on every request, see sessionIdleDue.
					return
				}
				s.sessions.Put(ctx, sessionTouchedAt, time.Now().UnixMilli())
				token, expiry, err := s.sessions.Commit(ctx)
				if err != nil {
					s.log.Error("session commit", "err", err)
					return
				}
				s.sessions.WriteSessionCookie(ctx, c.Response(), token, expiry)
			case scs.Destroyed:
				s.sessions.WriteSessionCookie(ctx, c.Response(), "", time.Time{})
			}
		})
		return next(c)
	}
}

// sessionValues is the session's values as text, to tell whether a
// request changed them (sessionTouchedAt aside).
func (s *Server) sessionValues(ctx context.Context) string {
	var b strings.Builder
	for _, k := range s.sessions.Keys(ctx) {
		if k != sessionTouchedAt {
			fmt.Fprintf(&b, "%q=%#v;", k, s.sessions.Get(ctx, k))
		}
	}
	return b.String()
}

// sessionIdleDue says whether the session's idle deadline is due to be
// moved on: a session that changed nothing is written (its expiry pushed
// to now plus the idle timeout) at most every sessionRefresh, not on every
// page view, which was a write and a commit for every GET. The idle
// timeout is then kept to within sessionRefresh.
func (s *Server) sessionIdleDue(ctx context.Context) bool {
	touched := time.UnixMilli(s.sessions.GetInt64(ctx, sessionTouchedAt))
	return time.Since(touched) >= sessionRefresh(s.sessions.IdleTimeout)
}

// sessionRefresh is how often a session in use is written to move its
// idle deadline: every minute, or a tenth of a shorter idle timeout.
func sessionRefresh(idle time.Duration) time.Duration {
	return min(time.Minute, idle/10)
}

// noStore keeps the response out of every cache (the browser's history and
// back-forward cache, a shared proxy): signed-in pages, and the error
// pages on their routes, are for this user and this moment only.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return next(c)
	}
}

// requireUser lets signed-in users through and sends others to sign in.
func (s *Server) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, err := uuid.Parse(s.sessions.GetString(ctx, sessionUserID))
		if err == nil {
			p, perr := s.auth.SessionPrincipal(ctx, id, time.UnixMicro(s.sessions.GetInt64(ctx, sessionSignedInAt)))
			if perr == nil {
				c.Set(principalKey, p)
				return next(c)
			}
			if apperr.Code(perr) != apperr.EUNAUTH {
				return perr
			}
		}
		signin := "/signin?next=" + url.QueryEscape(c.Request().URL.RequestURI())
		if isHTMX(c) {
			c.Response().Header().Set("HX-Redirect", signin)
			return c.NoContent(http.StatusUnauthorized)
		}
		if c.Request().Method == http.MethodGet && !wantsJSON(c) {
			return c.Redirect(http.StatusSeeOther, signin)
		}
		return apperr.Errorf(apperr.EUNAUTH, "Sign in first.")
	}
}

// requireApprover admits approvers and admins.
func (s *Server) requireApprover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !principal(c).CanApprove() {
			return apperr.Errorf(apperr.EFORBIDDEN, "This page is for approvers and admins.")
		}
		return next(c)
	}
}

// requireResolver admits whoever may resolve some approval packets:
// approvers, admins and holders of a named approver role.
func (s *Server) requireResolver(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !principal(c).CanResolveSome() {
			return apperr.Errorf(apperr.EFORBIDDEN, "This page is for approvers, admins and holders of an approver role.")
		}
		return next(c)
	}
}

// requireToken authenticates API callers by bearer token.
func (s *Server) requireToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, ok := bearerToken(c)
		if !ok {
			return auth.ErrBadToken
		}
		p, err := s.authenticateBearer(c, token)
		if err != nil {
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// bearerOr authenticates by bearer token when the request carries one, and
// through the browser chain (session, CSRF, sign-in) otherwise. A token
// that does not authenticate is a 401, never a way around the browser
// chain; put oneCredential before it, so a request that also carries a
// session cookie is refused.
func (s *Server) bearerOr(signedIn []echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		viaToken := s.requireToken(next)
		viaSession := next
		for i := len(signedIn) - 1; i >= 0; i-- {
			viaSession = signedIn[i](viaSession)
		}
		return func(c echo.Context) error {
			if hasBearer(c) {
				return viaToken(c)
			}
			return viaSession(c)
		}
	}
}

// principal returns the authenticated caller; the zero value outside
// authenticated routes.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// shell builds the layout's view model for this request.
func (s *Server) shell(c echo.Context, title, nav string) views.Shell {
	sh := views.Shell{Title: title, Nav: nav}
	sh.CSRF, _ = c.Get(middleware.DefaultCSRFConfig.ContextKey).(string)
	if p, ok := c.Get(principalKey).(auth.Principal); ok && p.TokenKind == "" {
		sh.User = &views.ShellUser{Email: p.Email, Role: string(p.Role), CanApprove: p.CanApprove(), CanResolve: p.CanResolveSome()}
		sh.Counts = s.navCounts(c)
	}
	return sh
}

// render writes a templ component as an HTML response. The page is
// rendered into a buffer first and sent in one write with its length: a
// page streamed as templ writes it went out in 4 KB chunks, a system call
// each (a conversation's page of 50 cards, 150 KB, spent a seventh of
// its time in them), and a component that fails halfway leaves nothing
// sent, so the error gets its own page instead of half of this one.
func render(c echo.Context, status int, comp templ.Component) error {
	buf := pageBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledPage {
			buf.Reset()
			pageBufs.Put(buf)
		}
	}()
	if err := comp.Render(c.Request().Context(), buf); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(buf.Bytes())
	return err
}

// pageBufs are the buffers pages are rendered into; one that grew past
// maxPooledPage is left to the garbage collector.
var pageBufs = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 64<<10)) }}

const maxPooledPage = 1 << 20

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
