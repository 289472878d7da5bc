package proposals

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Idempotency keys follow the IETF Idempotency-Key draft. A key belongs to
// its caller: it is scoped to the workspace, the calling principal (the API
// token, or the signed-in user) and the tool, and kept in PostgreSQL, so it
// holds across server instances. The first request holds the key while it
// runs, links it to the proposal it records (in the proposal's
// transaction), then stores its response; a replay inside the window gets
// that response, byte for byte, and nothing runs again. A request that died
// in flight holds its key only for a lease: after it, a retry takes over a
// key that recorded nothing, or reads the real state of the proposal the
// key recorded.

var keyFormat = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)

// ParseIdempotencyKey checks a key as a caller sent it (header or body): 16
// to 64 of A–Z a–z 0–9 _ -, nothing else (no spaces, no Unicode look-alikes).
func ParseIdempotencyKey(key string) (string, error) {
	if !keyFormat.MatchString(key) {
		return "", ErrBadIdempotencyKey
	}
	return key, nil
}

// DefaultIdempotencyLease is how long a key held by a request that never
// finished keeps answering "in progress".
const DefaultIdempotencyLease = 60 * time.Second

// ErrBadIdempotencyKey is a key that does not fit the format.
var ErrBadIdempotencyKey = &apperr.Error{Code: apperr.EBADREQ,
	Message: "The idempotency key must be 16 to 64 letters, digits, '_' or '-'.",
	Fields:  []apperr.FieldError{{Field: "idempotency_key", Message: "must match ^[A-Za-z0-9_-]{16,64}$"}}}

// StoredResponse is the response a first request stored under its key.
type StoredResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// Idem is a held key: the caller passes it to Propose (which links it to
// the proposal), then Stores the response or Releases the key (a refused
// request stores nothing, so the caller may fix it and retry with the same
// key).
type Idem struct {
	s         *Service
	ws        uuid.UUID
	principal string
	tool      string
	key       string
	claimedAt time.Time
	owned     bool
}

// Begun is what BeginIdempotent found under a key: exactly one of its
// fields is set.
type Begun struct {
	// Held: the key is this request's; run it.
	Held *Idem
	// Replay: the same request finished; answer with its response.
	Replay *StoredResponse
	// Recorded: the request that held the key died after recording its
	// proposal; answer with the proposal's real state (an "applying" one is
	// under review and is never run again).
	Recorded *Proposal
}

// RequestHash is the SHA-256 of the request's canonical JSON (RFC 8785):
// the same request hashes the same whatever its key order or spacing.
func RequestHash(request any) ([]byte, error) {
	b, err := json.Marshal(request)
	if err != nil {
		return nil, fmt.Errorf("proposals: encode request: %w", err)
	}
	canonical, err := canonjson.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("proposals: canonical request: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return sum[:], nil
}

// principalKey names whose key it is: the API token, else the user.
func principalKey(p auth.Principal) string {
	if p.TokenID != uuid.Nil {
		return "token:" + p.TokenID.String()
	}
	return "user:" + p.UserID.String()
}

// BeginIdempotent checks that the scope is the caller's, then holds key for
// this request or answers for it:
//   - a fresh key (or one past its window): Held;
//   - the same request, done: Replay;
//   - a different request under the key: 422;
//   - the same request still running after a short wait: 409 with the
//     seconds left on its lease;
//   - the same request, whose holder died (past the lease): Held again if
//     it recorded nothing, else Recorded with the proposal's real state.
func (s *Service) BeginIdempotent(ctx context.Context, p auth.Principal, scope Scope, toolName, key string, hash []byte) (Begun, error) {
	tool, _ := s.tools.Get(toolName)
	return s.beginIdempotent(ctx, p, scope, tool, key, hash)
}

// beginIdempotent is BeginIdempotent for tool (nil: none of that name).
func (s *Service) beginIdempotent(ctx context.Context, p auth.Principal, scope Scope, tool *tools.Tool, key string, hash []byte) (Begun, error) {
	key, err := ParseIdempotencyKey(key)
	if err != nil {
		return Begun{}, err
	}
	if tool == nil {
		return Begun{Held: &Idem{}}, nil // Propose answers 404 for the tool; nothing to hold
	}
	if err := s.ownsScope(ctx, s.q, p, scope); err != nil {
		return Begun{}, err // not the caller's scope: nothing is held or replayed
	}
	who := principalKey(p)
	held := func(at time.Time) Begun {
		return Begun{Held: &Idem{s: s, ws: p.WorkspaceID, principal: who, tool: tool.Name, key: key, claimedAt: at, owned: true}}
	}
	deadline := time.Now().Add(s.idemWait)
	for {
		at, err := s.q.ClaimIdempotencyKey(ctx, db.ClaimIdempotencyKeyParams{WorkspaceID: p.WorkspaceID, Principal: who, Tool: tool.Name, Key: key,
			RequestHash: hash, ExpiresAt: time.Now().Add(tool.Contract.Idempotency.Window)})
		if err == nil {
			return held(at), nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Begun{}, fmt.Errorf("proposals: claim idempotency key: %w", err)
		}
		row, err := s.q.GetIdempotencyKey(ctx, db.GetIdempotencyKeyParams{WorkspaceID: p.WorkspaceID, Principal: who, Tool: tool.Name, Key: key})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released or expired meanwhile: try to claim again
		}
		if err != nil {
			return Begun{}, fmt.Errorf("proposals: read idempotency key: %w", err)
		}
		if string(row.RequestHash) != string(hash) {
			return Begun{}, &apperr.Error{Code: apperr.EINVALID,
				Message: "This idempotency key was used for a different request; use a new key for a new request.",
				Fields:  []apperr.FieldError{{Field: "idempotency_key", Message: "was used for a different request"}}}
		}
		if row.State == "done" {
			return Begun{Replay: &StoredResponse{Status: int(row.ResponseStatus.Int32), ContentType: row.ResponseContentType.String, Body: row.ResponseBody}}, nil
		}
		leaseStart := time.Now().Add(-s.idemLease)
		if row.CreatedAt.Before(leaseStart) || row.CreatedAt.Equal(leaseStart) {
			if row.ProposalID.Valid {
				prop, err := s.Get(ctx, p, row.ProposalID.UUID)
				if err != nil {
					return Begun{}, err
				}
				return Begun{Recorded: &prop}, nil
			}
			at, err := s.q.TakeOverIdempotencyKey(ctx, db.TakeOverIdempotencyKeyParams{WorkspaceID: p.WorkspaceID, Principal: who, Tool: tool.Name, Key: key, LeaseStart: leaseStart})
			if err == nil {
				return held(at), nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return Begun{}, fmt.Errorf("proposals: take over idempotency key: %w", err)
			}
			continue // another retry took it, or it finished meanwhile
		}
		if time.Now().After(deadline) {
			wait := max(1, int(time.Until(row.CreatedAt.Add(s.idemLease)).Seconds()+0.999))
			e := apperr.Errorf(apperr.ECONFLICT, "A request with this idempotency key is still being processed; retry in %d s for its outcome.", wait)
			e.Extra = map[string]any{"retry_after": wait}
			return Begun{}, e
		}
		select {
		case <-ctx.Done():
			return Begun{}, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// link ties the held key to the proposal, in the proposal's transaction. A
// key taken over by a retry (this request outlived its lease) refuses, so
// the call is recorded by one of them only.
// links reports whether link writes anything (a key this request holds).
func (i *Idem) links() bool { return i != nil && i.owned }

func (i *Idem) link(ctx context.Context, q *db.Queries, proposalID uuid.UUID) error {
	if i == nil || !i.owned {
		return nil
	}
	n, err := q.LinkIdempotencyKey(ctx, db.LinkIdempotencyKeyParams{WorkspaceID: i.ws, Principal: i.principal, Tool: i.tool, Key: i.key,
		ProposalID: nullUUID(proposalID), ClaimedAt: i.claimedAt})
	if err != nil {
		return fmt.Errorf("proposals: link idempotency key: %w", err)
	}
	if n == 0 {
		return apperr.Errorf(apperr.ECONFLICT, "This request took too long and a retry with the same idempotency key took over; its outcome is the retry's.")
	}
	return nil
}

// Store keeps the response for replays.
func (i *Idem) Store(ctx context.Context, r StoredResponse) error {
	if i == nil || !i.owned {
		return nil
	}
	i.owned = false
	err := i.s.q.StoreIdempotentResponse(ctx, db.StoreIdempotentResponseParams{WorkspaceID: i.ws, Principal: i.principal, Tool: i.tool, Key: i.key,
		ResponseStatus: pgtype.Int4{Int32: int32(r.Status), Valid: true}, ResponseContentType: pgtype.Text{String: r.ContentType, Valid: true},
		ResponseBody: r.Body, ClaimedAt: i.claimedAt})
	if err != nil {
		return fmt.Errorf("proposals: store idempotent response: %w", err)
	}
	return nil
}

// Release frees the key without a response, unless the request recorded a
// proposal under it; safe to call after Store.
func (i *Idem) Release(ctx context.Context) {
	if i == nil || !i.owned {
		return
	}
	i.owned = false
	if err := i.s.q.ReleaseIdempotencyKey(context.WithoutCancel(ctx), db.ReleaseIdempotencyKeyParams{WorkspaceID: i.ws, Principal: i.principal, Tool: i.tool, Key: i.key, ClaimedAt: i.claimedAt}); err != nil {
		i.s.log.Warn("releasing an idempotency key", "tool", i.tool, "err", err)
	}
}
