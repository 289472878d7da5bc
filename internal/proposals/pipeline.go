package proposals

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// beginning is a db.DBTX for exactly one QueryRow: the query travels in
// one round trip with the BEGIN of the transaction it starts (pgx's
// Batch.BeginTx); the callTx holds that transaction afterwards. A call's
// decision reads its rows this way: the transaction costs no round trip of
// its own.
type beginning struct {
	send func(context.Context, *pgx.Batch) pgx.BatchResults
	sent bool
}

var errBeginningOneQuery = errors.New("proposals: a beginning transaction carries exactly one QueryRow")

func (b *beginning) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if b.sent {
		return errRow{errBeginningOneQuery}
	}
	b.sent = true
	batch := &pgx.Batch{}
	batch.BeginTx(pgx.TxOptions{})
	batch.Queue(sql, args...)
	return &beginRow{br: b.send(ctx, batch)}
}

func (b *beginning) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errBeginningOneQuery
}

func (b *beginning) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errBeginningOneQuery
}

// beginRow reads the BEGIN's result, then the query's row, and closes the
// batch (the transaction stays open on its connection).
type beginRow struct{ br pgx.BatchResults }

func (r *beginRow) Scan(dest ...any) error {
	if _, err := r.br.Exec(); err != nil {
		r.br.Close()
		return err
	}
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// callTx is a call's transaction on one pooled connection, begun with the
// call's first query (beginning) and able to send COMMIT with its last
// one (committing). It is pgx's own transaction underneath; what it adds
// is owning the connection, so that a COMMIT sent in a batch can end the
// transaction without another round trip. One from lazyCall takes its
// connection and begins with its first statement instead, so that a path
// which may write nothing need not open a transaction.
type callTx struct {
	pgx.Tx
	conn *pgxpool.Conn
	// pool is where a lazyCall's connection comes from.
	pool *pgxpool.Pool
	done bool
}

// beginCall starts a call's transaction with its first query, which the
// returned beginning carries (see beginDeciding).
func (s *Service) beginCall(ctx context.Context) (*callTx, *beginning, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	t := &callTx{conn: conn}
	return t, &beginning{send: func(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
		br := conn.SendBatch(ctx, b)
		t.Tx = br.Tx()
		return br
	}}, nil
}

// lazyCall is a call's transaction that takes a connection and begins
// with its first statement (see begin), if one comes.
func (s *Service) lazyCall() *callTx { return &callTx{pool: s.pool} }

// begun reports whether the transaction began.
func (t *callTx) begun() bool { return t.Tx != nil }

// begin begins a lazyCall's transaction, if no statement has yet.
func (t *callTx) begin(ctx context.Context) error {
	switch {
	case t.done:
		return pgx.ErrTxClosed
	case t.Tx != nil:
		return nil
	}
	if t.conn == nil {
		conn, err := t.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("proposals: acquire: %w", err)
		}
		t.conn = conn
	}
	tx, err := t.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("proposals: begin: %w", err)
	}
	t.Tx = tx
	return nil
}

func (t *callTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *callTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *callTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

// Begin is a savepoint in the transaction (begun first if need be).
func (t *callTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

// Conn is the call's connection (nil before a lazyCall's first
// statement).
func (t *callTx) Conn() *pgx.Conn {
	if t.conn == nil {
		return nil
	}
	return t.conn.Conn()
}

// Commit commits the transaction; one that never began (nothing was
// written: see lazyCall) only gives its connection back, if it had one.
func (t *callTx) Commit(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	if t.Tx == nil {
		t.release()
		return nil
	}
	err := t.Tx.Commit(ctx)
	t.release()
	return unknownOutcome(uuid.Nil, err)
}

func (t *callTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	var err error
	if t.Tx != nil {
		err = t.Tx.Rollback(ctx)
	}
	t.release()
	return err
}

func (t *callTx) release() {
	if !t.done {
		t.done = true
		if t.conn != nil {
			t.conn.Release() // a connection left in a transaction is destroyed, not reused
		}
	}
}

// committing is a db.DBTX for the transaction's last statement: its one
// QueryRow travels with COMMIT in one round trip. When the statement
// fails the server skips the COMMIT and the transaction stays open (and
// aborted) for the caller's Rollback.
func (t *callTx) committing() *committer { return &committer{t: t} }

// committingThen is committing, calling sent once the statement and its
// COMMIT are on their way (before their results are read).
func (t *callTx) committingThen(sent func()) *committer { return &committer{t: t, sent: sent} }

type committer struct {
	t    *callTx
	sent func()
}

func (c *committer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.t.done {
		return errRow{pgx.ErrTxClosed}
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("commit")
	br := c.t.conn.SendBatch(ctx, b)
	if c.sent != nil {
		c.sent()
	}
	return &commitRow{t: c.t, br: br}
}

func (c *committer) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errCommitterOneQuery
}

func (c *committer) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errCommitterOneQuery
}

var errCommitterOneQuery = errors.New("proposals: a committing transaction carries exactly one QueryRow")

type commitRow struct {
	t  *callTx
	br pgx.BatchResults
}

func (r *commitRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	committed := false
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = r.br.Exec()
		if err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
		committed = err == nil
	}
	if cerr := r.br.Close(); err == nil && !committed {
		// (Once COMMIT has answered, a connection lost before the end of
		// the batch changes nothing: the transaction committed.)
		err = cerr
	}
	if committed || r.t.conn.Conn().PgConn().TxStatus() == 'I' {
		// Committed (or, after a commit that rolled back, ended): the
		// transaction is over and its connection goes back to the pool
		// (or, lost, is destroyed).
		r.t.release()
	}
	return unknownOutcome(uuid.Nil, err)
}

// ErrOutcomeUnknown is a transaction whose COMMIT was sent but whose
// answer never came (the connection failed): it may have committed or
// not. Nothing of it may run again on its own; the caller learns the
// outcome by retrying with its idempotency key, or by reading the
// proposal (see OutcomeUnknownError).
var ErrOutcomeUnknown = errors.New("proposals: the connection failed while committing; the outcome is unknown")

// OutcomeUnknownError is ErrOutcomeUnknown with its cause, and the
// proposal the transaction was recording when that is known.
type OutcomeUnknownError struct {
	// ProposalID is the proposal the transaction records if it
	// committed (uuid.Nil: not known).
	ProposalID uuid.UUID
	Err        error
}

func (e *OutcomeUnknownError) Error() string {
	msg := ErrOutcomeUnknown.Error()
	if e.Err != nil {
		msg = e.Err.Error()
		if !errors.Is(e.Err, ErrOutcomeUnknown) {
			msg = ErrOutcomeUnknown.Error() + ": " + msg
		}
	}
	if e.ProposalID != uuid.Nil {
		msg += fmt.Sprintf(" (proposal %s)", e.ProposalID)
	}
	return msg
}

// Unwrap keeps both in the chain: errors.Is matches ErrOutcomeUnknown and
// the connection's own error.
func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

// commitUnknown reports whether a transaction whose COMMIT may have been
// sent ended with err without learning whether it committed: anything
// but an answer from the server (an ERROR, or a COMMIT that rolled
// back) or an error that happened before anything was sent.
func commitUnknown(err error) bool {
	var pe *pgconn.PgError
	switch {
	case err == nil, errors.Is(err, ErrOutcomeUnknown):
		return false
	case errors.Is(err, pgx.ErrTxCommitRollback), errors.Is(err, pgx.ErrTxClosed), sentNothing(err):
		return false
	case errors.As(err, &pe):
		// A FATAL error (the server shutting down, the backend killed)
		// can come after the COMMIT ran.
		sev := pe.SeverityUnlocalized
		if sev == "" {
			sev = pe.Severity
		}
		return sev == "FATAL" || sev == "PANIC"
	}
	return true
}

// sentNothing reports whether err is sure to have happened before
// anything was sent (pgconn.SafeToRetry). Not "conn closed": pgconn also
// reports a connection lost while reading an answer that way, once its
// first read error has closed it (MultiResultReader.NextResult drops
// that error), so the COMMIT may well have been sent.
func sentNothing(err error) bool {
	return pgconn.SafeToRetry(err) && !errors.Is(err, pgconn.ErrConnClosed)
}

// unknownOutcome is err, made an OutcomeUnknownError naming proposal id
// when it leaves a COMMIT's outcome unknown; any other error is returned
// as it is.
func unknownOutcome(id uuid.UUID, err error) error {
	var ue *OutcomeUnknownError
	switch {
	case errors.As(err, &ue) && (ue.ProposalID != uuid.Nil || id == uuid.Nil):
		return err // says all there is to say
	case errors.Is(err, ErrOutcomeUnknown) && id == uuid.Nil:
		return err
	case errors.Is(err, ErrOutcomeUnknown), commitUnknown(err):
		return &OutcomeUnknownError{ProposalID: id, Err: err}
	}
	return err
}
