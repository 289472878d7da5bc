// Package apperr is the application's error vocabulary: a code that says
// what went wrong and a message that is safe to show to the caller. Anything
// else that reaches the edge is an internal error, logged and never shown.
package apperr

import (
	"errors"
	"fmt"
)

// Codes, after WTF Dial's error.go; the web layer maps each to a status.
const (
	EINVALID   = "invalid"     // input fails validation (422)
	EBADREQ    = "bad_request" // malformed request (400)
	EUNAUTH    = "unauthorized"
	EFORBIDDEN = "forbidden"
	ENOTFOUND  = "not_found"
	ECONFLICT  = "conflict"
	EGONE      = "gone"
	ERATELIMIT = "rate_limited"
	// EUNSUPPORTED is a body in a media type the endpoint does not take (415).
	EUNSUPPORTED = "unsupported_media_type"
	EINTERNAL    = "internal"
)

// FieldError names one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error with a code and a safe message.
type Error struct {
	Code    string
	Message string
	Fields  []FieldError
	// Extra is attached to problem+json bodies (a decision, a retry hint).
	Extra map[string]any
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid builds an EINVALID error that names the fields at fault.
func Invalid(message string, fields ...FieldError) *Error {
	return &Error{Code: EINVALID, Message: message, Fields: fields}
}

// Code returns the code of err, EINTERNAL when it carries none.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// Message returns the safe message of err, a generic one when it has none.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}
