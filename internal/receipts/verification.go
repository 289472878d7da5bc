package receipts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
)

// A verification of a workspace's whole chain is a background run: a
// request starts one (or joins the one that waits or runs already) and
// answers at once; a worker on any instance claims it, reads the chain a
// page at a time and saves its progress after every page; a run whose
// worker stopped is resumed from its progress by another.

// A verification's status.
const (
	VerificationQueued  = "queued"
	VerificationRunning = "running"
	VerificationDone    = "done"
	VerificationFailed  = "failed"
)

// ErrVerificationNotFound is a verification that is not in the caller's
// workspace.
var ErrVerificationNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such verification.")

// staleAfter is how long a running verification may go without a
// heartbeat (one per page, every fraction of a second) before another
// worker takes it over from its last progress.
const staleAfter = 30 * time.Second

// maxAttempts is how many times a run is tried before it fails: a run that
// fails on every worker must not loop forever.
const maxAttempts = 3

// Verification is one run verifying a workspace's chain from seq 1 to the
// head it had when the run started (TargetSeq).
type Verification struct {
	ID          uuid.UUID
	WorkspaceID uuid.UUID
	Status      string
	// Checked receipts so far, of TargetSeq (-1 while queued, before the
	// head is read).
	Checked   int64
	TargetSeq int64
	CreatedAt time.Time
	StartedAt *time.Time
	// FinishedAt is set once done or failed.
	FinishedAt *time.Time
	// Result is the outcome once done.
	Result *Result
	// Error says why the run failed (failed), safe to show.
	Error string
}

// Finished reports whether the run has ended, done or failed.
func (v Verification) Finished() bool {
	return v.Status == VerificationDone || v.Status == VerificationFailed
}

// VerifiedHead is the head of the latest verification that ended ok.
type VerifiedHead struct {
	RunID      uuid.UUID
	Seq        int64
	Hash       []byte
	VerifiedAt time.Time
}

func fromVerificationRow(r db.ReceiptVerification) Verification {
	v := Verification{ID: r.ID, WorkspaceID: r.WorkspaceID, Status: r.Status, Checked: r.Checked, TargetSeq: -1,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Error: r.Error.String}
	if r.TargetSeq.Valid {
		v.TargetSeq = r.TargetSeq.Int64
	}
	if r.Status == VerificationDone {
		res := Result{WorkspaceID: r.WorkspaceID.String(), OK: r.Ok.Bool, Checked: r.Checked, HeadSeq: r.HeadSeq, HeadHash: Hex(r.HeadHash),
			FirstBadSeq: r.FirstBadSeq.Int64, Reason: r.Reason.String, ContentErrors: r.ContentErrors, FirstContentErrorSeq: r.FirstContentErrorSeq,
			Pending: r.Pending.Int64}
		if r.OldestPendingAt != nil {
			at := r.OldestPendingAt.UTC()
			res.OldestPendingAt = &at
		}
		v.Result = &res
	}
	return v
}

// StartVerification starts a verification of the caller's workspace chain
// in the background (any user of the workspace), or joins the one that
// waits or runs already, and waits up to wait for it to finish: a page can
// show a short chain's result at once; the API answers at once (wait 0).
func (s *Service) StartVerification(ctx context.Context, c Caller, wait time.Duration) (Verification, error) {
	if !c.isUser() {
		return Verification{}, errUsersOnly
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Verification{}, fmt.Errorf("receipts: start verification: %w", err)
	}
	// A run that ends between the insert that met it and the read that
	// looks for it leaves room for a new one: try again.
	for range 3 {
		row, err := s.q.InsertReceiptVerification(ctx, db.InsertReceiptVerificationParams{ID: id, WorkspaceID: c.WorkspaceID,
			RequestedBy: uuid.NullUUID{UUID: c.UserID, Valid: true}, HeadHash: GenesisHash})
		if err == nil {
			s.wakeVerifier()
			return s.awaitVerification(ctx, fromVerificationRow(row), wait)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Verification{}, fmt.Errorf("receipts: start verification: %w", err)
		}
		row, err = s.q.GetActiveReceiptVerification(ctx, c.WorkspaceID)
		if err == nil {
			return s.awaitVerification(ctx, fromVerificationRow(row), wait)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Verification{}, fmt.Errorf("receipts: join verification: %w", err)
		}
	}
	return Verification{}, fmt.Errorf("receipts: start verification of %s: runs kept ending as it started", c.WorkspaceID)
}

// Verification returns a verification of the caller's workspace (any user
// of the workspace): its progress, and its result once done.
func (s *Service) Verification(ctx context.Context, c Caller, id uuid.UUID) (Verification, error) {
	if !c.isUser() {
		return Verification{}, errUsersOnly
	}
	return s.verification(ctx, c.WorkspaceID, id)
}

func (s *Service) verification(ctx context.Context, ws, id uuid.UUID) (Verification, error) {
	row, err := s.q.GetReceiptVerification(ctx, db.GetReceiptVerificationParams{ID: id, WorkspaceID: ws})
	if errors.Is(err, pgx.ErrNoRows) {
		return Verification{}, ErrVerificationNotFound
	}
	if err != nil {
		return Verification{}, fmt.Errorf("receipts: verification %s: %w", id, err)
	}
	return fromVerificationRow(row), nil
}

// awaitVerification polls a run until it finishes or wait has passed,
// and returns it as it is then.
func (s *Service) awaitVerification(ctx context.Context, v Verification, wait time.Duration) (Verification, error) {
	deadline := time.Now().Add(wait)
	for pause := 10 * time.Millisecond; !v.Finished() && time.Now().Add(pause).Before(deadline); pause = min(2*pause, 200*time.Millisecond) {
		select {
		case <-ctx.Done():
			return Verification{}, ctx.Err()
		case <-time.After(pause):
		}
		var err error
		if v, err = s.verification(ctx, v.WorkspaceID, v.ID); err != nil {
			return Verification{}, err
		}
	}
	return v, nil
}

// VerifiedHead returns the head of the workspace's latest verification
// that ended ok (false when none has).
func (s *Service) VerifiedHead(ctx context.Context, ws uuid.UUID) (VerifiedHead, bool, error) {
	h, err := s.q.GetVerifiedReceiptHead(ctx, ws)
	if errors.Is(err, pgx.ErrNoRows) {
		return VerifiedHead{}, false, nil
	}
	if err != nil {
		return VerifiedHead{}, false, fmt.Errorf("receipts: verified head of %s: %w", ws, err)
	}
	return VerifiedHead{RunID: h.ID, Seq: h.HeadSeq, Hash: h.HeadHash, VerifiedAt: h.VerifiedAt}, true, nil
}

// VerificationsQueued receives when this instance queued a verification,
// so its worker starts it at once instead of at its next poll.
func (s *Service) VerificationsQueued() <-chan struct{} { return s.queued }

func (s *Service) wakeVerifier() {
	select {
	case s.queued <- struct{}{}:
	default:
	}
}

// errClaimLost is a run that another worker took over (this one's
// heartbeat went stale): this one stops without writing.
var errClaimLost = errors.New("receipts: the verification was taken over by another worker")

// RunVerifications claims and runs verifications, one at a time, until
// none waits: the queued ones, oldest first, and the running ones whose
// worker stopped beating (their instance died), from their progress. It
// returns how many it finished. Every instance runs it; a run has one
// worker at a time.
func (s *Service) RunVerifications(ctx context.Context, log *slog.Logger) (int, error) {
	n := 0
	for ctx.Err() == nil {
		row, err := s.q.ClaimReceiptVerification(ctx, staleAfter.Seconds())
		if errors.Is(err, pgx.ErrNoRows) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("receipts: claim a verification: %w", err)
		}
		if err := s.runVerification(ctx, row, log); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// runVerification runs one claimed run to its end, or hands it back.
func (s *Service) runVerification(ctx context.Context, run db.ReceiptVerification, log *slog.Logger) error {
	ws := run.WorkspaceID
	v := ResumeVerifier(Progress{Checked: run.Checked, HeadSeq: run.HeadSeq, HeadHash: run.HeadHash,
		ContentErrors: run.ContentErrors, FirstContentErrorSeq: run.FirstContentErrorSeq})
	err := s.walkChain(ctx, ws, v, run.TargetSeq.Int64, func(p Progress) error {
		n, err := s.q.SaveReceiptVerificationProgress(ctx, db.SaveReceiptVerificationProgressParams{ID: run.ID, WorkspaceID: run.WorkspaceID, Attempt: run.Attempt,
			Checked: p.Checked, HeadSeq: p.HeadSeq, HeadHash: p.HeadHash, ContentErrors: p.ContentErrors, FirstContentErrorSeq: p.FirstContentErrorSeq})
		if err != nil {
			return fmt.Errorf("receipts: verification %s: progress: %w", run.ID, err)
		}
		if n == 0 {
			return errClaimLost
		}
		return nil
	})
	if err == nil {
		err = s.finishVerification(ctx, run, v)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errClaimLost):
		log.Warn("a receipt chain verification was taken over by another worker", "verification", run.ID)
		return nil
	}
	// Hand the run back, or fail it after its last attempt, with a
	// context of its own: the server may be closing.
	end, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if ctx.Err() != nil {
		_, rerr := s.q.ReleaseReceiptVerification(end, db.ReleaseReceiptVerificationParams{ID: run.ID, WorkspaceID: run.WorkspaceID, Attempt: run.Attempt})
		return rerr // else another worker resumes it once its heartbeat is stale
	}
	if run.Attempt >= maxAttempts {
		_, ferr := s.q.FailReceiptVerification(end, db.FailReceiptVerificationParams{ID: run.ID, WorkspaceID: run.WorkspaceID, Attempt: run.Attempt,
			Error: pgtype.Text{String: fmt.Sprintf("The verification failed %d times (a database error); see the server log, or start another.", run.Attempt), Valid: true}})
		return errors.Join(err, ferr)
	}
	_, rerr := s.q.ReleaseReceiptVerification(end, db.ReleaseReceiptVerificationParams{ID: run.ID, WorkspaceID: run.WorkspaceID, Attempt: run.Attempt})
	return errors.Join(err, rerr)
}

// finishVerification records a run's result. The verified head is the
// head of the latest run that ended ok (VerifiedHead).
func (s *Service) finishVerification(ctx context.Context, run db.ReceiptVerification, v *Verifier) error {
	res, err := s.withPending(ctx, run.WorkspaceID, v.Result())
	if err != nil {
		return err
	}
	p := v.Progress()
	arg := db.FinishReceiptVerificationParams{ID: run.ID, WorkspaceID: run.WorkspaceID, Attempt: run.Attempt,
		Checked: p.Checked, HeadSeq: p.HeadSeq, HeadHash: p.HeadHash, ContentErrors: p.ContentErrors, FirstContentErrorSeq: p.FirstContentErrorSeq,
		Ok: pgtype.Bool{Bool: res.OK, Valid: true}, Pending: pgtype.Int8{Int64: res.Pending, Valid: true}, OldestPendingAt: res.OldestPendingAt}
	if !res.OK {
		arg.FirstBadSeq, arg.Reason = pgtype.Int8{Int64: res.FirstBadSeq, Valid: true}, pgtype.Text{String: res.Reason, Valid: true}
	}
	n, err := s.q.FinishReceiptVerification(ctx, arg)
	if err != nil {
		return fmt.Errorf("receipts: verification %s: finish: %w", run.ID, err)
	}
	if n == 0 {
		return errClaimLost
	}
	return nil
}
