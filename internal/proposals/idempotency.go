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
	"github.com/gowebpki/jcs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Idempotency keys follow the IETF Idempotency-Key draft. A key is scoped
// to the workspace and the tool and kept in PostgreSQL, so it holds across
// server instances. The first request holds the key while it runs, then
// stores its response; a replay inside the window gets that response, byte
// for byte, and nothing runs again.

var keyFormat = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)

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

// Idem is a held key: the caller runs the request, then Stores its
// response or Releases the key (a refused request stores nothing, so the
// caller may fix it and retry with the same key).
type Idem struct {
	s     *Service
	ws    uuid.UUID
	tool  string
	key   string
	owned bool
}

// RequestHash is the SHA-256 of the request's canonical JSON (RFC 8785):
// the same request hashes the same whatever its key order or spacing.
func RequestHash(request any) ([]byte, error) {
	b, err := json.Marshal(request)
	if err != nil {
		return nil, fmt.Errorf("proposals: encode request: %w", err)
	}
	canonical, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("proposals: canonical request: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return sum[:], nil
}

// BeginIdempotent holds key for this request, or answers for it:
//   - a fresh key (or one past its window): held, (idem, nil, nil);
//   - the same request, done: (nil, stored response, nil);
//   - a different request under the key: 422;
//   - the same request still running after a short wait: 409.
func (s *Service) BeginIdempotent(ctx context.Context, p auth.Principal, toolName, key string, hash []byte) (*Idem, *StoredResponse, error) {
	if !keyFormat.MatchString(key) {
		return nil, nil, ErrBadIdempotencyKey
	}
	tool, ok := s.tools.Get(toolName)
	if !ok {
		return &Idem{}, nil, nil // Propose answers 404 for the tool; nothing to hold
	}
	deadline := time.Now().Add(s.idemWait)
	for {
		_, err := s.q.ClaimIdempotencyKey(ctx, db.ClaimIdempotencyKeyParams{WorkspaceID: p.WorkspaceID, Tool: tool.Name, Key: key,
			RequestHash: hash, ExpiresAt: time.Now().Add(tool.Contract.Idempotency.Window)})
		if err == nil {
			return &Idem{s: s, ws: p.WorkspaceID, tool: tool.Name, key: key, owned: true}, nil, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, fmt.Errorf("proposals: claim idempotency key: %w", err)
		}
		held, err := s.q.GetIdempotencyKey(ctx, db.GetIdempotencyKeyParams{WorkspaceID: p.WorkspaceID, Tool: tool.Name, Key: key})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released or expired meanwhile: try to claim again
		}
		if err != nil {
			return nil, nil, fmt.Errorf("proposals: read idempotency key: %w", err)
		}
		if string(held.RequestHash) != string(hash) {
			return nil, nil, &apperr.Error{Code: apperr.EINVALID,
				Message: "This idempotency key was used for a different request; use a new key for a new request.",
				Fields:  []apperr.FieldError{{Field: "idempotency_key", Message: "was used for a different request"}}}
		}
		if held.State == "done" {
			return nil, &StoredResponse{Status: int(held.ResponseStatus.Int32), ContentType: held.ResponseContentType.String, Body: held.ResponseBody}, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, apperr.Errorf(apperr.ECONFLICT, "A request with this idempotency key is still being processed; retry later.")
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Store keeps the response for replays.
func (i *Idem) Store(ctx context.Context, r StoredResponse) error {
	if i == nil || !i.owned {
		return nil
	}
	i.owned = false
	err := i.s.q.StoreIdempotentResponse(ctx, db.StoreIdempotentResponseParams{WorkspaceID: i.ws, Tool: i.tool, Key: i.key,
		ResponseStatus: pgtype.Int4{Int32: int32(r.Status), Valid: true}, ResponseContentType: pgtype.Text{String: r.ContentType, Valid: true}, ResponseBody: r.Body})
	if err != nil {
		return fmt.Errorf("proposals: store idempotent response: %w", err)
	}
	return nil
}

// Release frees the key without a response; safe to call after Store.
func (i *Idem) Release(ctx context.Context) {
	if i == nil || !i.owned {
		return
	}
	i.owned = false
	if err := i.s.q.ReleaseIdempotencyKey(context.WithoutCancel(ctx), db.ReleaseIdempotencyKeyParams{WorkspaceID: i.ws, Tool: i.tool, Key: i.key}); err != nil {
		i.s.log.Warn("releasing an idempotency key", "tool", i.tool, "err", err)
	}
}
