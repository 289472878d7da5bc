package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/strictjson"
)

// Hostile input stops here, before any handler, decoder or query sees it:
// every route's path and query, JSON bodies (strictjson: valid UTF-8, no
// NUL, no lone surrogates, no duplicate keys, numbers a float64 holds,
// nesting at most jsonLimits.MaxDepth, nothing after the value) and form
// bodies (valid UTF-8, no NUL or control characters but tab and line
// breaks). A refusal is 400 (malformed) or 422 (naming the field), written
// nothing; a body over the limit is 413, chunked or not.

// jsonLimits bound every JSON body (documented in the README).
var jsonLimits = strictjson.Limits{MaxDepth: strictjson.DefaultMaxDepth, MaxNumberLen: strictjson.DefaultMaxNumberLen}

// maxQueryValue is the most characters a query parameter may have.
const maxQueryValue = 2000

// checkInput is the middleware that refuses hostile input on every route.
func (s *Server) checkInput(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if err := checkURL(req.URL); err != nil {
			return err
		}
		if req.Body == nil || req.Body == http.NoBody || req.Method == http.MethodGet || req.Method == http.MethodHead {
			return next(c)
		}
		media, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
		switch media {
		case echo.MIMEApplicationJSON:
			body, err := readBody(c)
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(body)) > 0 {
				if err := strictjson.Check(body, jsonLimits); err != nil {
					return jsonProblem(body, err)
				}
			}
		case echo.MIMEApplicationForm:
			body, err := readBody(c)
			if err != nil {
				return err
			}
			form, err := url.ParseQuery(string(body))
			if err != nil {
				return apperr.Errorf(apperr.EBADREQ, "The form is malformed (a bad %%-escape or separator).")
			}
			if err := checkValues(form, "", true); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// readBody reads the whole request body (bounded by the body limit) and
// puts it back for the handler. A body over the limit is 413, however it
// was sent.
func readBody(c echo.Context) ([]byte, error) {
	req := c.Request()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he // the body limit's 413
		}
		return nil, apperr.Errorf(apperr.EBADREQ, "The request body could not be read.")
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	return body, nil
}

// checkURL refuses a path or query that is not valid UTF-8 or carries
// control characters, and query values longer than maxQueryValue.
func checkURL(u *url.URL) error {
	if reason := badText(u.Path, false); reason != "" {
		return apperr.Errorf(apperr.EBADREQ, "The path %s.", reason)
	}
	if u.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return apperr.Errorf(apperr.EBADREQ, "The query string is malformed (a bad %%-escape or separator).")
	}
	return checkValues(q, "query ", false)
}

// checkValues refuses names and values that are not valid UTF-8 or carry
// NUL or control characters (multiline values may have tabs and line
// breaks); query values are also bounded in length.
func checkValues(v url.Values, what string, multiline bool) error {
	for name, values := range v {
		if reason := badText(name, false); reason != "" {
			return apperr.Invalid(fmt.Sprintf("A %sfield name %s.", what, reason), apperr.FieldError{Field: safeName(name), Message: reason})
		}
		for _, value := range values {
			if reason := badText(value, multiline); reason != "" {
				return apperr.Invalid(fmt.Sprintf("The %sfield %q %s.", what, name, reason), apperr.FieldError{Field: name, Message: reason})
			}
			if !multiline && utf8.RuneCountInString(value) > maxQueryValue {
				return apperr.Invalid(fmt.Sprintf("The %sfield %q is longer than %d characters.", what, name, maxQueryValue),
					apperr.FieldError{Field: name, Message: fmt.Sprintf("must have at most %d characters", maxQueryValue)})
			}
		}
	}
	return nil
}

// badText says what is wrong with s, or "" when nothing is.
func badText(s string, multiline bool) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case r == 0:
			return "contains a NUL character"
		case multiline && (r == '\t' || r == '\n' || r == '\r'):
		case r < 0x20 || r == 0x7f:
			return "contains a control character"
		}
	}
	return ""
}

// safeName is a field name fit to echo back: invalid bytes replaced.
func safeName(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > 64 {
		s = string([]rune(s)[:64])
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, s)
}

// jsonProblem turns strictjson's refusal of body into the caller's error:
// 400 for a document that is not JSON at all, 422 naming the field for
// JSON that Gatehouse refuses (NUL, lone surrogates, duplicate keys…).
func jsonProblem(body []byte, err error) error {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return apperr.Errorf(apperr.EBADREQ, "The request body must be one JSON value.")
	}
	if !json.Valid(body) {
		return &apperr.Error{Code: apperr.EBADREQ, Message: "The request body is not valid JSON: " + se.Reason + ".",
			Fields: []apperr.FieldError{{Field: "body", Message: se.Reason}}}
	}
	if name, ok := strings.CutPrefix(se.Reason, "unknown field "); ok && se.Path == "" {
		// encoding/json names an unknown field but not where it stands.
		name = safeName(strings.Trim(name, `"`))
		return apperr.Invalid(fmt.Sprintf("The field %q is not known; nothing was done.", name), apperr.FieldError{Field: name, Message: "is not a known field"})
	}
	if se.Path == "" {
		return &apperr.Error{Code: apperr.EBADREQ, Message: "The request body is not acceptable JSON: " + se.Reason + ".",
			Fields: []apperr.FieldError{{Field: "body", Message: se.Reason}}}
	}
	return apperr.Invalid(fmt.Sprintf("The field %s %s.", safeName(se.Path), se.Reason), apperr.FieldError{Field: safeName(se.Path), Message: se.Reason})
}

// decodeJSON decodes a body strictly into v: unknown fields refused too.
func decodeJSON(body []byte, v any) error {
	if err := strictjson.Decode(body, v, jsonLimits, true); err != nil {
		return jsonProblem(body, err)
	}
	return nil
}
