package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/proposals"
)

// Every way pgx reports that the database went away answers 503 with
// Retry-After, never 500; a call whose COMMIT's answer was lost also says
// that its outcome is unknown, and which proposal it would be.
func TestErrors_DatabaseUnavailableIs503AndAnUnknownOutcomeSaysSo(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("01a213d9-ec3d-76ce-8153-2ad9329d886c")
	// As pgx wraps them: a read that found the connection closed, a
	// reset, a write to a closed socket, a connection pgx closed after an
	// earlier failure.
	eof := fmt.Errorf("proposals: record call: %w", io.ErrUnexpectedEOF)
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, c := range []struct {
		name    string
		err     error
		status  int
		unknown bool
		id      string
	}{
		{"unexpected EOF mid-answer", eof, 503, false, ""},
		{"EOF, wrapped twice", fmt.Errorf("proposals: read conversation: %w", fmt.Errorf("scan: %w", io.EOF)), 503, false, ""},
		{"connection reset", fmt.Errorf("proposals: claim idempotency key: %w", reset), 503, false, ""},
		{"broken pipe", fmt.Errorf("proposals: begin: %w", os.NewSyscallError("write", syscall.EPIPE)), 503, false, ""},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), 503, false, ""},
		{"conn closed", fmt.Errorf("proposals: commit: %w", pgconn.ErrConnClosed), 503, false, ""},
		{"use of a closed connection", &net.OpError{Op: "read", Net: "unix", Err: net.ErrClosed}, 503, false, ""},
		{"admin shutdown (57P01)", fmt.Errorf("q: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}), 503, false, ""},
		{"connection failure (08006)", &pgconn.PgError{Code: "08006"}, 503, false, ""},
		{"too many connections (53300)", &pgconn.PgError{Code: "53300"}, 503, false, ""},
		{"idle session timeout (57P05)", &pgconn.PgError{Code: "57P05"}, 503, false, ""},
		{"the group's chain", fmt.Errorf("%w: %w", proposals.ErrOutcomeUnknown, io.ErrUnexpectedEOF), 503, true, ""},
		{"a group's mismatch, with no cause", fmt.Errorf("%w: 2 recorded of 3", proposals.ErrOutcomeUnknown), 503, true, ""},
		{"a lost COMMIT naming its proposal", fmt.Errorf("web: %w", &proposals.OutcomeUnknownError{ProposalID: id, Err: eof}), 503, true, id.String()},
		{"a lost COMMIT whose proposal is not known", &proposals.OutcomeUnknownError{Err: fmt.Errorf("proposals: commit: %w", reset)}, 503, true, ""},
		{"a COMMIT that rolled back", fmt.Errorf("proposals: commit: %w", pgx.ErrTxCommitRollback), 500, false, ""},
		{"a canceled request", fmt.Errorf("proposals: begin: %w", context.Canceled), 500, false, ""},
		{"a query the database refused", &pgconn.PgError{Severity: "ERROR", Code: "42P01"}, 500, false, ""},
		{"a plain error", errors.New("boom"), 500, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &Server{log: slog.New(slog.DiscardHandler)}
			rec := httptest.NewRecorder()
			ctx := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/api/v1/conversations/x/tool-calls", nil), rec)
			s.handleError(c.err, ctx)
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body: %v: %s", err, rec.Body)
			}
			if rec.Code != c.status || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%v: %d %s, want %d problem+json: %s", c.err, rec.Code, rec.Header().Get("Content-Type"), c.status, rec.Body)
			}
			if got := rec.Header().Get("Retry-After"); (c.status == 503) != (got == "5") {
				t.Errorf("Retry-After %q with %d", got, rec.Code)
			}
			if c.status == 503 && (body["code"] != "unavailable" || body["retry_after"] != 5.0) {
				t.Errorf("503 problem: %s", rec.Body)
			}
			if got, _ := body["outcome_unknown"].(bool); got != c.unknown {
				t.Errorf("outcome_unknown %v, want %v: %s", got, c.unknown, rec.Body)
			}
			if got, _ := body["proposal_id"].(string); got != c.id {
				t.Errorf("proposal_id %q, want %q: %s", got, c.id, rec.Body)
			}
			if c.status == 500 && body["detail"] != "Internal error." {
				t.Errorf("500 shows more than Internal error: %s", rec.Body)
			}
		})
	}
}
