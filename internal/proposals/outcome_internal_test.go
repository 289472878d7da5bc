package proposals

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// notSent is an error pgconn marks as raised before anything was sent.
type notSent struct{}

func (notSent) Error() string     { return "not sent" }
func (notSent) SafeToRetry() bool { return true }

func TestCommitUnknown_OnlyAnAnswerOrNothingSentIsKnown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"committed", nil, false},
		{"the COMMIT rolled back", pgx.ErrTxCommitRollback, false},
		{"the transaction was over", pgx.ErrTxClosed, false},
		{"the server refused the statement", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, false},
		{"nothing was sent", fmt.Errorf("batch: %w", notSent{}), false},
		{"the server closed the connection mid-answer", fmt.Errorf("record call: %w", io.ErrUnexpectedEOF), true},
		// pgconn reports a read that failed after its first error closed
		// the connection as "conn closed", which says SafeToRetry.
		{"conn closed mid-answer", fmt.Errorf("commit: %w", pgconn.ErrConnClosed), true},
		{"the server shut down mid-commit", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, true},
		{"a local error after sending", errors.New("scan: cannot decode"), true},
	} {
		if got := commitUnknown(c.err); got != c.want {
			t.Errorf("%s (%v): %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestUnknownOutcome_NamesTheProposalAndKeepsTheCause(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	lost := fmt.Errorf("proposals: record call: %w", io.ErrUnexpectedEOF)
	// Marked where the COMMIT was read, then named where the id is known.
	err := unknownOutcome(id, fmt.Errorf("proposals: commit: %w", unknownOutcome(uuid.Nil, lost)))
	var ue *OutcomeUnknownError
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &ue) || ue.ProposalID != id {
		t.Fatalf("%v: want ErrOutcomeUnknown naming %s, with the EOF in its chain", err, id)
	}
	// A known outcome stays as it was.
	refused := &pgconn.PgError{Severity: "ERROR", Code: "23505"}
	if got := unknownOutcome(id, refused); got != refused {
		t.Fatalf("a refused statement became %v", got)
	}
	if unknownOutcome(id, nil) != nil {
		t.Fatal("no error became one")
	}
}
