package receipts

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
)

// Caller is who asks, as the receipts service needs to know them. The web
// layer fills it from auth.Principal: this package cannot import auth,
// which records receipts of its own (role changes).
type Caller struct {
	WorkspaceID     uuid.UUID
	UserID, TokenID uuid.UUID
	// Agent is an agent token; Role the user's workspace role.
	Agent bool
	Role  string
}

// AuditIdentity makes a Caller an audit.Actor.
func (c Caller) AuditIdentity() (userID, tokenID uuid.UUID, agent bool) {
	return c.UserID, c.TokenID, c.Agent
}

func (c Caller) isUser() bool     { return c.UserID != uuid.Nil && !c.Agent }
func (c Caller) isAdmin() bool    { return c.isUser() && c.Role == "admin" }
func (c Caller) isApprover() bool { return c.isUser() && (c.Role == "admin" || c.Role == "approver") }

// Who may do what: any user of the workspace may verify its chain and get
// a checkpoint (neither shows any content); approvers and admins read
// receipts (their content is every call's arguments); admins redact.
// Agents do none of it.
var (
	errUsersOnly     = apperr.Errorf(apperr.EFORBIDDEN, "Receipts are verified with a user's token or session, not an agent's.")
	errApproversOnly = apperr.Errorf(apperr.EFORBIDDEN, "Receipts are for approvers and admins (a user token or a session).")
	errAdminsOnly    = apperr.Errorf(apperr.EFORBIDDEN, "Only admins redact receipts.")
	// ErrNotFound is a receipt that is not in the caller's workspace.
	ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such receipt.")
	// ErrNoSigningKey is a server that has no checkpoint key.
	ErrNoSigningKey = apperr.Errorf(apperr.ENOTFOUND, "This server signs no checkpoints: it has no receipt signing key.")
)

// Service reads, verifies, signs and redacts receipts; Record writes them
// and Sequence chains them.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	signer *Signer
	// stallBound is how long a receipt may wait for the sequencer before a
	// verification fails; now is the clock it is measured with.
	stallBound time.Duration
	now        func() time.Time
	// queued wakes this instance's verification worker (RunVerifications).
	queued chan struct{}
	// verifyPage is how many receipts a verification reads in one query.
	verifyPage int
}

// DefaultStallBound is how long a receipt may wait to be chained before a
// verification reports the chain as stalled. The sequencer chains within
// a second; a backlog of a million receipts takes about a minute.
const DefaultStallBound = 5 * time.Minute

// NewService returns the receipts service, without a signing key.
func NewService(pool *pgxpool.Pool) *Service {
	return &Service{pool: pool, q: db.New(pool), stallBound: DefaultStallBound, now: time.Now, queued: make(chan struct{}, 1), verifyPage: VerifyPage}
}

// WithStallBound returns the service failing verifications over receipts
// that have waited longer than d to be chained, measured with now.
func (s *Service) WithStallBound(d time.Duration, now func() time.Time) *Service {
	out := *s
	out.stallBound, out.now = d, now
	return &out
}

// WithSigner returns the service signing checkpoints with s.
func (s *Service) WithSigner(signer *Signer) *Service {
	out := *s
	out.signer = signer
	return &out
}

// Receipt is one receipt as stored.
type Receipt struct {
	ID          uuid.UUID
	WorkspaceID uuid.UUID
	Kind        string
	ProposalID  uuid.UUID // uuid.Nil when none
	ActionClass string
	// Seq is 0, and PrevHash and Hash nil, while the receipt waits for the
	// sequencer.
	Seq         int64
	PrevHash    []byte
	Hash        []byte
	ContentHash []byte
	Metadata    json.RawMessage
	// Content is nil once redacted.
	Content     json.RawMessage
	RedactedFor string
	RedactedAt  *time.Time
	CreatedAt   time.Time
	ChainedAt   *time.Time
}

// Pending reports whether the receipt is not chained yet.
func (r Receipt) Pending() bool { return r.Seq == 0 }

// Row is the receipt as the verifier reads it.
func (r Receipt) Row() Row {
	return Row{ReceiptID: r.ID.String(), Seq: r.Seq, PrevHash: r.PrevHash, Hash: r.Hash, ContentHash: r.ContentHash,
		Metadata: r.Metadata, Content: r.Content, Redacted: r.RedactedAt != nil, RedactedFor: r.RedactedFor}
}

func fromRow(r db.ReceiptRow) Receipt {
	out := Receipt{ID: r.ID, WorkspaceID: r.WorkspaceID, Kind: r.Kind, ActionClass: r.ActionClass.String, Seq: r.Seq.Int64,
		PrevHash: r.PrevHash, Hash: r.Hash, ContentHash: r.ContentHash, Metadata: r.Metadata, RedactedFor: r.RedactedFor.String,
		RedactedAt: r.RedactedAt, CreatedAt: r.CreatedAt, ChainedAt: r.ChainedAt}
	if r.ProposalID.Valid {
		out.ProposalID = r.ProposalID.UUID
	}
	if r.Content != nil {
		out.Content = json.RawMessage(r.Content)
	}
	return out
}

func fromRows(rows []db.ReceiptRow) []Receipt {
	out := make([]Receipt, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out
}

// VerifyPage is how many receipts a verification reads in one query:
// a million receipts in 500 queries, each its own statement, so no
// transaction stays open through a verification and the sequencer and
// calls never wait for one. A page of receipts of a call's size is about
// 5 MB, and verifyAhead pages are read ahead while one is hashed (pages
// of 10,000 took the verifying process from 41 to 128 MB with one page
// ahead, at 300,000 receipts, and were no faster).
const VerifyPage = 2000

// verifyAhead is how many pages a verification reads ahead of the one
// it checks, each on a connection of its own. Two were no faster beside
// calls (35 s for a million receipts either way) and took more from them.
const verifyAhead = 1

// verifyHashers is how many goroutines hash a page: half the cores, at
// least one. A verification runs beside calls; on every core (2 of 2 on
// the bench's machine) it verified a million receipts in 29 s but slowed
// the calls' median 2.7 times.
func verifyHashers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// VerifyWorkspace verifies a workspace's chain in this process, a page at
// a time, up to the head it has when it starts (the command line; the
// server runs verifications in the background: StartVerification).
// Without a checkpoint it reads the chain from seq 1. With one, it proves
// the chain extends it and reads only the checkpoint's receipt and those
// after it (see NewVerifierAt; the checkpoint's signature is the caller's
// to check: VerifyCheckpoint). Unchained receipts are not part of the
// chain yet, but one that has waited longer than the stall bound makes the
// result not OK.
func (s *Service) VerifyWorkspace(ctx context.Context, ws uuid.UUID, cp *Checkpoint) (Result, error) {
	through, _, err := head(ctx, s.q, ws)
	if err != nil {
		return Result{}, err
	}
	v := NewVerifier()
	if cp != nil {
		if cp.Seq > through {
			return Result{WorkspaceID: ws.String(), HeadSeq: through, FromSeq: cp.Seq, FirstBadSeq: through + 1,
				Reason: fmt.Sprintf("the chain ends at seq %d, before the checkpoint's seq %d: receipts were removed", through, cp.Seq)}, nil
		}
		v = NewVerifierAt(cp.Seq, cp.HeadHashBytes())
	}
	if err := s.walkChain(ctx, ws, v, through, nil); err != nil {
		return Result{}, err
	}
	res := v.Result()
	res.WorkspaceID = ws.String()
	return s.withPending(ctx, ws, res)
}

// withPending adds the receipts that wait for the sequencer to a result,
// and fails it when one has waited longer than the stall bound.
func (s *Service) withPending(ctx context.Context, ws uuid.UUID, res Result) (Result, error) {
	p, err := pending(ctx, s.q, ws)
	if err != nil {
		return Result{}, err
	}
	if res.Pending = p.Pending; p.Pending > 0 {
		oldest := p.Oldest.UTC()
		res.OldestPendingAt = &oldest
		if waited := s.now().Sub(oldest); waited > s.stallBound && res.OK {
			res.OK, res.FirstBadSeq = false, res.HeadSeq+1
			res.Reason = fmt.Sprintf("%d receipts wait to be chained, the oldest for %s (since %s), longer than %s: the sequencer is stalled or far behind",
				p.Pending, waited.Round(time.Second), oldest.Format(time.RFC3339), s.stallBound)
		}
	}
	return res, nil
}

// walkChain feeds v the workspace's chain from the seq it expects next
// through seq through, VerifyPage receipts a query, and calls saved (when
// not nil) with the progress after every page. It stops at the first
// receipt that does not verify; a chain that ends before through is broken
// there. The next page is read while this one is hashed, so the database
// and the hashing overlap (verifyAhead pages ahead, each its own
// statement); a page's receipts are hashed on verifyHashers goroutines
// (their hashes depend on nothing before them), then checked against each
// other in order.
func (s *Service) walkChain(ctx context.Context, ws uuid.UUID, v *Verifier, through int64, saved func(Progress) error) error {
	type page struct {
		rows []db.ListChainForVerificationRow
		err  error
	}
	// Seqs are gapless: page k holds the seqs after from+k*size through
	// from+(k+1)*size, so pages can be read ahead of the one being checked
	// (verifyAhead of them, on connections of their own) and are checked
	// in order. (A page that comes back short or empty is a chain with
	// seqs missing, which the verifier reports at the next receipt it
	// reads, or at the end.)
	pages := make(chan chan page, verifyAhead)
	var readers sync.WaitGroup
	defer readers.Wait()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	from, size := v.Next()-1, int64(s.verifyPage)
	readers.Go(func() {
		defer close(pages)
		for after := from; after < through; after += size {
			next := make(chan page, 1)
			select {
			case pages <- next:
			case <-ctx.Done():
				return
			}
			readers.Go(func() {
				rows, err := s.q.ListChainForVerification(ctx, db.ListChainForVerificationParams{WorkspaceID: ws, AfterSeq: after, ThroughSeq: through, PageSize: int32(size)})
				if err != nil {
					err = fmt.Errorf("receipts: verify %s after seq %d: %w", ws, after, err)
				}
				next <- page{rows, err}
			})
		}
	})
	var rows []Row
	var pre []PreparedRow
	for next := range pages {
		p := <-next
		if p.err != nil {
			return p.err
		}
		if len(p.rows) == 0 {
			continue // seqs missing: the next receipt found (or the end) says from where
		}
		rows = rows[:0]
		for _, r := range p.rows {
			rows = append(rows, Row{ReceiptID: r.ID.String(), Seq: r.Seq, PrevHash: r.PrevHash, Hash: r.Hash, ContentHash: r.ContentHash,
				Metadata: r.Metadata, Content: r.Content, Redacted: r.Redacted, RedactedFor: r.RedactedFor.String})
		}
		// The page's hashes on half the cores (the rest are the calls');
		// then the chain, in order.
		pre = slices.Grow(pre[:0], len(rows))[:len(rows)]
		PrepareAll(rows, pre, verifyHashers())
		for i, row := range rows {
			if !v.AddPrepared(row, pre[i]) {
				return nil
			}
		}
		if saved != nil {
			if err := saved(v.Progress()); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v.endsBefore(through)
	return nil
}

// Workspaces lists every workspace (the command line verifies them all).
func (s *Service) Workspaces(ctx context.Context) ([]uuid.UUID, error) {
	ids, err := s.q.ListReceiptWorkspaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("receipts: workspaces: %w", err)
	}
	return ids, nil
}

// head is a workspace's chain head (0 and GenesisHash when empty).
func head(ctx context.Context, q *db.Queries, ws uuid.UUID) (int64, []byte, error) {
	h, err := chainHead(ctx, q, ws)
	return h.Seq, h.Hash, err
}

// chainHead is the head's link (seq 0, the genesis hash and position 0
// for an empty chain).
func chainHead(ctx context.Context, q *db.Queries, ws uuid.UUID) (db.GetReceiptChainHeadRow, error) {
	h, err := q.GetReceiptChainHead(ctx, ws)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.GetReceiptChainHeadRow{Hash: GenesisHash}, nil
	}
	if err != nil {
		return h, fmt.Errorf("receipts: head of %s: %w", ws, err)
	}
	return h, nil
}

// pending counts the receipts of ws that wait for the sequencer (up to
// 10,000) and the oldest one's time.
func pending(ctx context.Context, q *db.Queries, ws uuid.UUID) (db.CountUnchainedReceiptsRow, error) {
	h, err := chainHead(ctx, q, ws)
	if err != nil {
		return db.CountUnchainedReceiptsRow{}, err
	}
	p, err := q.CountUnchainedReceipts(ctx, db.CountUnchainedReceiptsParams{WorkspaceID: ws, AfterPos: h.ReceiptPos})
	if err != nil {
		return p, fmt.Errorf("receipts: pending in %s: %w", ws, err)
	}
	return p, nil
}

// Checkpoint signs the caller's workspace head at now (any user of the
// workspace). It signs the head as stored: a verification says whether
// the chain up to it holds.
func (s *Service) Checkpoint(ctx context.Context, c Caller, now time.Time) (SignedCheckpoint, error) {
	if !c.isUser() {
		return SignedCheckpoint{}, errUsersOnly
	}
	if s.signer == nil {
		return SignedCheckpoint{}, ErrNoSigningKey
	}
	seq, hash, err := head(ctx, s.q, c.WorkspaceID)
	if err != nil {
		return SignedCheckpoint{}, err
	}
	return s.signer.Sign(c.WorkspaceID, seq, hash, now)
}

// PublicKey is the checkpoint key's public half and its id.
func (s *Service) PublicKey() (PublicKeyInfo, error) {
	if s.signer == nil {
		return PublicKeyInfo{}, ErrNoSigningKey
	}
	pub := s.signer.PublicKey()
	return PublicKeyInfo{KeyID: s.signer.KeyID(), Raw: pub, PEM: PublicKeyPEM(pub)}, nil
}

// PublicKeyInfo is a public key in the forms auditors use.
type PublicKeyInfo struct {
	KeyID string
	Raw   []byte
	PEM   string
}

// MaxExportPage is the most receipts one export page holds.
const MaxExportPage = 10000

// Export returns up to limit chained receipts after seq afterSeq, in seq
// order (approvers and admins): everything needed to verify them.
func (s *Service) Export(ctx context.Context, c Caller, afterSeq int64, limit int) ([]Receipt, error) {
	if !c.isApprover() {
		return nil, errApproversOnly
	}
	if afterSeq < 0 {
		return nil, apperr.Invalid("after_seq must be 0 or more.", apperr.FieldError{Field: "after_seq", Message: "must be 0 or more"})
	}
	if limit < 1 || limit > MaxExportPage {
		return nil, apperr.Invalid(fmt.Sprintf("limit must be 1 to %d.", MaxExportPage), apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be 1 to %d", MaxExportPage)})
	}
	rows, err := s.q.ListChainedReceipts(ctx, db.ListChainedReceiptsParams{WorkspaceID: c.WorkspaceID, AfterSeq: afterSeq, Limit: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("receipts: export: %w", err)
	}
	return fromRows(rows), nil
}

// Get returns one receipt of the caller's workspace (approvers and
// admins), chained or still pending.
func (s *Service) Get(ctx context.Context, c Caller, id uuid.UUID) (Receipt, error) {
	if !c.isApprover() {
		return Receipt{}, errApproversOnly
	}
	r, err := s.q.GetReceipt(ctx, db.GetReceiptParams{ID: id, WorkspaceID: c.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Receipt{}, ErrNotFound
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("receipts: get %s: %w", id, err)
	}
	return fromRow(r), nil
}

// Overview is the state of a workspace's chain, for its admin page.
type Overview struct {
	HeadSeq  int64
	HeadHash []byte
	// Pending receipts wait for the sequencer; Oldest is when the oldest
	// of them was written.
	Pending int64
	Oldest  time.Time
	// Checkpoint is the head signed now (nil without a signing key).
	Checkpoint *SignedCheckpoint
	// Recent are the latest receipts (pending first), or a proposal's.
	Recent []Receipt
	// Verified is the head the latest verification that ended ok found
	// (nil when none has).
	Verified *VerifiedHead
	// Verification is the run asked for, or else the one that waits or
	// runs (nil when none).
	Verification *Verification
}

// OverviewQuery says what the admin page shows besides the chain's state.
type OverviewQuery struct {
	// Proposal lists that proposal's receipts instead of the Recent latest.
	Proposal uuid.UUID
	Recent   int
	// Verify starts a verification (or joins the one that waits or runs)
	// and waits up to Wait for its result; Verification shows that run.
	Verify       bool
	Wait         time.Duration
	Verification uuid.UUID
}

// Overview returns the chain's state and recent receipts, or those of
// one proposal (approvers and admins), the verified head and a
// verification's progress or result.
func (s *Service) Overview(ctx context.Context, c Caller, oq OverviewQuery, now time.Time) (Overview, error) {
	if !c.isApprover() {
		return Overview{}, errApproversOnly
	}
	var out Overview
	var err error
	if out.HeadSeq, out.HeadHash, err = head(ctx, s.q, c.WorkspaceID); err != nil {
		return Overview{}, err
	}
	p, err := pending(ctx, s.q, c.WorkspaceID)
	if err != nil {
		return Overview{}, err
	}
	out.Pending, out.Oldest = p.Pending, p.Oldest
	if s.signer != nil {
		cp, err := s.signer.Sign(c.WorkspaceID, out.HeadSeq, out.HeadHash, now)
		if err != nil {
			return Overview{}, err
		}
		out.Checkpoint = &cp
	}
	var rows []db.ReceiptRow
	if oq.Proposal != uuid.Nil {
		rows, err = s.q.ListProposalReceipts(ctx, db.ListProposalReceiptsParams{WorkspaceID: c.WorkspaceID, ProposalID: uuid.NullUUID{UUID: oq.Proposal, Valid: true}})
	} else {
		rows, err = s.q.ListRecentReceipts(ctx, db.ListRecentReceiptsParams{WorkspaceID: c.WorkspaceID, Lim: int32(oq.Recent)})
	}
	if err != nil {
		return Overview{}, fmt.Errorf("receipts: recent: %w", err)
	}
	out.Recent = fromRows(rows)
	var run Verification
	switch {
	case oq.Verify:
		run, err = s.StartVerification(ctx, c, oq.Wait)
	case oq.Verification != uuid.Nil:
		run, err = s.Verification(ctx, c, oq.Verification)
	default:
		var row db.ReceiptVerification
		if row, err = s.q.GetActiveReceiptVerification(ctx, c.WorkspaceID); err == nil {
			run = fromVerificationRow(row)
		} else if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err != nil {
		return Overview{}, err
	}
	if run.ID != uuid.Nil {
		out.Verification = &run
	}
	if h, ok, err := s.VerifiedHead(ctx, c.WorkspaceID); err != nil {
		return Overview{}, err
	} else if ok {
		out.Verified = &h
	}
	return out, nil
}

// Redaction is a redacted receipt and the receipt that records it.
type Redaction struct {
	Receipt          Receipt
	RedactionReceipt uuid.UUID
}

// Redact deletes a receipt's content for a stated reason (admins only).
// Its content_hash, metadata and place in the chain stay, so the chain
// still verifies. The redaction is itself receipted and audited in the
// same transaction. A redaction receipt is not redacted: it holds only the
// redacted receipt's id and the reason, and it is what shows that a
// redaction was deliberate.
func (s *Service) Redact(ctx context.Context, c Caller, id uuid.UUID, reason string, now time.Time) (Redaction, error) {
	if !c.isAdmin() {
		return Redaction{}, errAdminsOnly
	}
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n < 1 || n > 500 {
		return Redaction{}, apperr.Invalid("Say why, in 1 to 500 characters.", apperr.FieldError{Field: "redacted_for", Message: "must be 1 to 500 characters"})
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Redaction{}, fmt.Errorf("receipts: redact: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	row, err := q.GetReceiptForUpdate(ctx, db.GetReceiptForUpdateParams{ID: id, WorkspaceID: c.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Redaction{}, ErrNotFound
	}
	if err != nil {
		return Redaction{}, fmt.Errorf("receipts: redact %s: %w", id, err)
	}
	switch {
	case row.RedactedAt != nil:
		return Redaction{}, apperr.Errorf(apperr.ECONFLICT, "This receipt was redacted already.")
	case row.Kind == KindRedaction:
		return Redaction{}, apperr.Errorf(apperr.ECONFLICT, "A redaction's own receipt is not redacted: it shows the redaction was deliberate.")
	case row.ContentHash == nil:
		// Its content hash is the sequencer's to compute, from the content
		// (the automatic path's receipts): it must be chained (within a
		// second) before its content goes.
		e := apperr.Errorf(apperr.ECONFLICT, "This receipt is not chained yet; redact it in a second.")
		e.Extra = map[string]any{"retry_after": 1}
		return Redaction{}, e
	}
	at := now.UTC()
	if n, err := q.RedactReceipt(ctx, db.RedactReceiptParams{ID: id, WorkspaceID: c.WorkspaceID, ContentHash: row.ContentHash, RedactedFor: pgtype.Text{String: reason, Valid: true}, RedactedAt: &at}); err != nil {
		return Redaction{}, fmt.Errorf("receipts: redact %s: %w", id, err)
	} else if n != 1 {
		return Redaction{}, fmt.Errorf("receipts: redact %s: %d rows", id, n)
	}
	actor := Actor{Kind: "user", UserID: c.UserID.String(), Role: c.Role}
	if c.TokenID != uuid.Nil {
		actor.TokenID = c.TokenID.String()
	}
	rid, err := Record(ctx, q, c.WorkspaceID, Content{Kind: KindRedaction, Actor: actor,
		Change: map[string]any{"receipt_id": id.String(), "redacted_for": reason}}, now)
	if err != nil {
		return Redaction{}, err
	}
	if err := audit.Record(ctx, q, c, c.WorkspaceID, "receipt.redacted", "receipt", id.String(),
		map[string]any{"redacted_for": reason, "redaction_receipt_id": rid.String(), "seq": row.Seq.Int64}); err != nil {
		return Redaction{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Redaction{}, fmt.Errorf("receipts: redact %s: commit: %w", id, err)
	}
	row.Content, row.RedactedFor, row.RedactedAt = nil, pgtype.Text{String: reason, Valid: true}, &at
	return Redaction{Receipt: fromRow(row), RedactionReceipt: rid}, nil
}

// Hex is a hash as lowercase hex ("" for none).
func Hex(b []byte) string { return hex.EncodeToString(b) }
