package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

var codeStatus = map[string]int{
	apperr.EINVALID:     http.StatusUnprocessableEntity,
	apperr.EBADREQ:      http.StatusBadRequest,
	apperr.EUNAUTH:      http.StatusUnauthorized,
	apperr.EFORBIDDEN:   http.StatusForbidden,
	apperr.ENOTFOUND:    http.StatusNotFound,
	apperr.ECONFLICT:    http.StatusConflict,
	apperr.EGONE:        http.StatusGone,
	apperr.ERATELIMIT:   http.StatusTooManyRequests,
	apperr.EUNSUPPORTED: http.StatusUnsupportedMediaType,
	apperr.EINTERNAL:    http.StatusInternalServerError,
}

var statusCode = map[int]string{
	http.StatusBadRequest:            apperr.EBADREQ,
	http.StatusUnauthorized:          apperr.EUNAUTH,
	http.StatusForbidden:             apperr.EFORBIDDEN,
	http.StatusNotFound:              apperr.ENOTFOUND,
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              apperr.ECONFLICT,
	http.StatusGone:                  apperr.EGONE,
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusUnprocessableEntity:   apperr.EINVALID,
	http.StatusTooManyRequests:       apperr.ERATELIMIT,
	http.StatusServiceUnavailable:    "unavailable",
}

// problem is an RFC 9457 problem+json body.
type problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail"`
	Code      string              `json:"code"`
	RequestID string              `json:"request_id,omitempty"`
	Errors    []apperr.FieldError `json:"errors,omitempty"`
	Extra     map[string]any      `json:"-"`
	// dataBug marks input the database refused: validation should have
	// caught it, so it is logged like an internal error.
	dataBug bool
}

// body is the problem+json document.
func (p problem) body() map[string]any {
	body := map[string]any{}
	for k, v := range p.Extra {
		body[k] = v
	}
	body["type"], body["title"], body["status"], body["detail"], body["code"] = p.Type, p.Title, p.Status, p.Detail, p.Code
	if p.RequestID != "" {
		body["request_id"] = p.RequestID
	}
	if len(p.Errors) > 0 {
		body["errors"] = p.Errors
	}
	return body
}

// problemFor is the problem a request's error becomes: what handleError
// sends, and what an idempotency key stores for a refusal that recorded a
// proposal.
func problemFor(c echo.Context, err error) problem {
	p := toProblem(err)
	p.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	p.Title = http.StatusText(p.Status)
	p.Type = "urn:gatehouse:problem:" + p.Code
	return p
}

// toProblem turns any error into what the caller may see. Only errors that
// carry a code (apperr.Error, echo.HTTPError) show their message. A
// database that cannot be reached is 503 with a retry hint, not 500 (and
// says so when a call's COMMIT was lost on the way: the call may have
// been recorded); a value the database refused as data (a gap in
// validation, logged as a bug) is 400, never 500.
func toProblem(err error) problem {
	var ae *apperr.Error
	var he *echo.HTTPError
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, proposals.ErrOutcomeUnknown):
		return outcomeUnknown(err)
	case dbUnavailable(err):
		return problem{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Detail: "The database cannot be reached right now; retry shortly.", Extra: map[string]any{"retry_after": dbRetryAfter}}
	case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22"):
		return problem{Status: http.StatusBadRequest, Code: apperr.EBADREQ, Detail: "The request holds a value that cannot be stored.", dataBug: true}
	case errors.As(err, &ae):
		status, ok := codeStatus[ae.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		return problem{Status: status, Code: ae.Code, Detail: ae.Message, Errors: ae.Fields, Extra: ae.Extra}
	case errors.As(err, &he):
		code, ok := statusCode[he.Code]
		if !ok {
			code = apperr.EINTERNAL
		}
		detail := http.StatusText(he.Code)
		if msg, ok := he.Message.(string); ok && he.Code < 500 {
			detail = sentence(msg)
		}
		if he.Code >= 500 {
			detail = "Internal error."
		}
		return problem{Status: he.Code, Code: code, Detail: detail}
	default:
		return problem{Status: http.StatusInternalServerError, Code: apperr.EINTERNAL, Detail: "Internal error."}
	}
}

// dbRetryAfter is the seconds a 503 of an unreachable database asks a
// client to wait.
const dbRetryAfter = 5

// outcomeUnknown is the 503 of a call whose COMMIT was sent but whose
// answer the connection lost: it may have been recorded. A retry with the
// same idempotency key answers with what really happened (after the key's
// lease), and so does the proposal, when its id is known.
func outcomeUnknown(err error) problem {
	p := problem{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Detail: "The database connection failed while the call was being committed: it may have been recorded. " +
			"Retry with the same Idempotency-Key to get its real outcome.",
		Extra: map[string]any{"retry_after": dbRetryAfter, "outcome_unknown": true}}
	var ue *proposals.OutcomeUnknownError
	if errors.As(err, &ue) && ue.ProposalID != uuid.Nil {
		id := ue.ProposalID.String()
		p.Extra["proposal_id"] = id
		p.Detail = "The database connection failed while the call was being committed: it may have been recorded as proposal " + id + ". " +
			"Retry with the same Idempotency-Key to get its real outcome, or read /api/v1/proposals/" + id + " (not found: it was not recorded)."
	}
	return p
}

// handleError is the one error handler: problem+json under /api/, an htmx
// fragment for htmx requests, an error page otherwise. It logs only what
// the caller could not have caused.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemFor(c, err)
	switch {
	case p.Status == http.StatusServiceUnavailable:
		s.log.Warn("database unavailable", "err", err, "request_id", p.RequestID, "method", c.Request().Method, "path", c.Request().URL.Path)
	case p.Status >= 500, p.dataBug:
		s.log.Error("request failed", "err", err, "request_id", p.RequestID, "method", c.Request().Method, "path", c.Request().URL.Path)
	}
	if p.Status == http.StatusUnauthorized && (isAPI(c) || hasBearer(c) || isMCP(c)) {
		c.Response().Header().Set("WWW-Authenticate", s.bearerChallenge(c))
	}
	if secs, ok := p.Extra["retry_after"].(int); ok {
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	}

	var werr error
	switch {
	case c.Request().Method == http.MethodHead:
		werr = c.NoContent(p.Status)
	case isAPI(c) || isMCP(c) || wantsJSON(c) || hasBearer(c):
		c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
		c.Response().WriteHeader(p.Status)
		werr = jsonEncode(c.Response(), p.body())
	case isHTMX(c):
		msg := p.Detail
		if p.Status >= 500 {
			msg = fmt.Sprintf("Internal error (request id %s).", p.RequestID)
		}
		werr = render(c, p.Status, views.ErrorFragment(msg))
	case p.Status == http.StatusNotFound:
		werr = s.notFoundPage(c, p)
	default:
		werr = render(c, p.Status, views.ErrorPage(s.shell(c, p.Title, ""), views.ErrorView{
			Status: p.Status, Title: p.Title, Message: p.Detail, RequestID: p.RequestID,
		}))
	}
	if werr != nil {
		s.log.Warn("writing error response", "err", werr, "request_id", p.RequestID)
	}
}

// notFoundPage renders the 404 page with the navigation of whoever is
// signed in. An address no route matches ran no middleware, so the
// session (and the CSRF token the sign-out form needs) is loaded here.
func (s *Server) notFoundPage(c echo.Context, p problem) error {
	page := func(c echo.Context) error {
		return render(c, p.Status, views.NotFoundPage(s.shell(c, "Page not found", ""), views.ErrorView{
			Status: p.Status, Title: p.Title, Message: p.Detail, RequestID: p.RequestID,
		}))
	}
	if _, ok := c.Get(principalKey).(auth.Principal); ok || c.Request().Method != http.MethodGet {
		return page(c)
	}
	h := s.optionalUser(page)
	h = middleware.CSRFWithConfig(s.csrfConfig())(h)
	h = s.loadSession(h)
	return noStore(h)(c)
}

// optionalUser sets the signed-in user, if any, and never refuses.
func (s *Server) optionalUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		if id, err := uuid.Parse(s.sessions.GetString(ctx, sessionUserID)); err == nil {
			if p, err := s.auth.SessionPrincipal(ctx, id, time.UnixMicro(s.sessions.GetInt64(ctx, sessionSignedInAt))); err == nil {
				c.Set(principalKey, p)
			}
		}
		return next(c)
	}
}

// favicon answers /favicon.ico, which browsers ask for on their own, with
// the SVG icon the pages link to.
func (s *Server) favicon(c echo.Context) error {
	b, err := fs.ReadFile(staticFiles(), "favicon.svg")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=86400")
	return c.Blob(http.StatusOK, "image/svg+xml", b)
}

func isAPI(c echo.Context) bool  { return strings.HasPrefix(c.Request().URL.Path, "/api/") }
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// wantsJSON is true for callers that ask for JSON outside /api/ (the admin
// JSON endpoints, health checks).
func wantsJSON(c echo.Context) bool {
	accept := c.Request().Header.Get(echo.HeaderAccept)
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// dbUnavailable reports whether err means the database could not be
// reached, went away mid-request or is shutting down, as opposed to
// refusing the request. pgx reports a connection lost mid-answer as
// io.ErrUnexpectedEOF (the server closed it) or a *net.OpError (reset,
// broken pipe), and a use of the connection it then closed as
// pgconn.ErrConnClosed.
func dbUnavailable(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne *net.OpError
	switch {
	case err == nil, errors.Is(err, pgx.ErrTxCommitRollback), errors.Is(err, context.Canceled):
		// A COMMIT that rolled back was answered by the database; a
		// canceled request is its caller's going away.
		return false
	case errors.As(err, &ce):
		return true
	case errors.As(err, &pe):
		// connection exceptions, admin or crash shutdown, cannot connect
		// now, idle timeouts (the server closed the session), too many
		// connections
		switch pe.Code {
		case "57P01", "57P02", "57P03", "57P05", "25P03", "53300":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT):
		return true
	case pgconn.Timeout(err), errors.As(err, &ne):
		return true
	}
	// Not pgconn.SafeToRetry: it also holds for a connection used twice
	// at once ("conn busy"), which is a bug.
	return false
}

// sentence capitalises a library message and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
