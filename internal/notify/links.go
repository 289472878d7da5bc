package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// A one-time link decides one call, once, for the person it was sent to.
// Its token is base64url(workspace id: 16 bytes | secret: 24 bytes); only
// its SHA-256 is kept (action_links), with the recipient, the call (and
// packet), the SHA-256 of the call's exact arguments (JCS), and an expiry:
// 15 minutes, never after the packet's. The link's page shows what would
// run and never acts on GET; acting through it still needs that the
// person may decide the call (the service's own checks: roles, no
// self-approval, witnesses), and uses the link up.

// LinkLifetime is how long a link may be used.
const LinkLifetime = 15 * time.Minute

// PathPrefix is where links point: PathPrefix + token.
const PathPrefix = "/l/"

const linkSecretLen = 24

// Errors of a link that does nothing, each saying why.
var (
	ErrLinkInvalid  = apperr.Errorf(apperr.ENOTFOUND, "This link is not one Gatehouse sent, or it was altered.")
	ErrLinkExpired  = apperr.Errorf(apperr.EGONE, "This link has expired. Open the call in Gatehouse instead.")
	ErrLinkUsed     = apperr.Errorf(apperr.EGONE, "This link was used already.")
	ErrLinkNotYours = apperr.Errorf(apperr.EFORBIDDEN, "This link was sent to someone else. Open the call in Gatehouse instead.")
	ErrLinkStale    = apperr.Errorf(apperr.ECONFLICT, "The call this link was sent for changed, or was decided already.")
)

// argumentsHash is the SHA-256 of the arguments' JCS form.
func argumentsHash(args json.RawMessage) ([]byte, error) {
	c, err := canonjson.Transform(args)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c)
	return sum[:], nil
}

func linkHash(raw []byte) []byte {
	sum := sha256.Sum256(raw)
	return sum[:]
}

// newLink makes and stores a link for user to decide proposal (and
// packet approval) as its arguments are now; it returns its URL and
// expiry.
func (s *Service) newLink(ctx context.Context, ws, user, proposal uuid.UUID, approval uuid.NullUUID, args json.RawMessage, packetExpires *time.Time) (string, time.Time, error) {
	hash, err := argumentsHash(args)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("notify: hash arguments: %w", err)
	}
	raw := make([]byte, 16+linkSecretLen)
	copy(raw, ws[:])
	if _, err := rand.Read(raw[16:]); err != nil {
		return "", time.Time{}, err
	}
	expires := s.now().Add(LinkLifetime)
	if packetExpires != nil && packetExpires.Before(expires) {
		expires = *packetExpires
	}
	if err := s.q.InsertActionLink(ctx, db.InsertActionLinkParams{WorkspaceID: ws, TokenHash: linkHash(raw), UserID: user, ProposalID: proposal,
		ApprovalID: approval, ArgumentsHash: hash, ExpiresAt: expires}); err != nil {
		return "", time.Time{}, fmt.Errorf("notify: store a link: %w", err)
	}
	return s.base + PathPrefix + base64.RawURLEncoding.EncodeToString(raw), expires, nil
}

// Link is a link as its page shows it: the call it decides, as it is now.
type Link struct {
	db.GetActionLinkRow
	// Packet: the link decides an approval packet (else a confirm card).
	Packet bool
}

// Open reads a link for the signed-in person p: it must be Gatehouse's,
// theirs, not used, not expired, and the call must still wait, with the
// arguments it was sent for. Anything else is one of the Err* errors.
func (s *Service) Open(ctx context.Context, p auth.Principal, token string) (Link, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 16+linkSecretLen {
		return Link{}, ErrLinkInvalid
	}
	ws, _ := uuid.FromBytes(raw[:16])
	if ws != p.WorkspaceID {
		// Another workspace's link, or one altered: nothing is read.
		return Link{}, ErrLinkInvalid
	}
	row, err := s.q.GetActionLink(ctx, db.GetActionLinkParams{WorkspaceID: ws, TokenHash: linkHash(raw)})
	if errors.Is(err, pgx.ErrNoRows) {
		return Link{}, ErrLinkInvalid
	}
	if err != nil {
		return Link{}, fmt.Errorf("notify: read a link: %w", err)
	}
	l := Link{GetActionLinkRow: row, Packet: row.ApprovalID.Valid}
	switch {
	case row.UserID != p.UserID:
		return Link{}, ErrLinkNotYours
	case row.UsedAt != nil:
		return l, ErrLinkUsed
	case !s.now().Before(row.ExpiresAt):
		return l, ErrLinkExpired
	}
	hash, err := argumentsHash(row.Arguments)
	switch {
	case err != nil || !bytes.Equal(hash, row.ArgumentsHash):
		return l, ErrLinkStale
	case l.Packet && (row.PacketStatus != "pending" || row.ProposalStatus != proposals.StatusPendingApproval):
		return l, ErrLinkStale
	case !l.Packet && row.ProposalStatus != proposals.StatusPending:
		return l, ErrLinkStale
	}
	return l, nil
}

// Used marks a link used for action (approve or reject), once, after the
// call was decided through it, and audits it; ErrLinkUsed when another
// request used it first.
func (s *Service) Used(ctx context.Context, p auth.Principal, token string, l Link, action string) error {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return ErrLinkInvalid
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("notify: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	n, err := q.UseActionLink(ctx, db.UseActionLinkParams{WorkspaceID: p.WorkspaceID, TokenHash: linkHash(raw), UsedFor: pgtypeText(action)})
	if err != nil {
		return fmt.Errorf("notify: use a link: %w", err)
	}
	if n == 0 {
		return ErrLinkUsed
	}
	data := map[string]any{"proposal_id": l.ProposalID, "action": action, "tool": l.Tool}
	if l.ApprovalID.Valid {
		data["approval_id"] = l.ApprovalID.UUID
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "link.used", "proposal", l.ProposalID.String(), data); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
