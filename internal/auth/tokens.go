package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
)

// NewToken is what a new API token is and may do.
type NewToken struct {
	Kind TokenKind
	Name string
	// ExpiresAt is when the token stops working; nil: never.
	ExpiresAt *time.Time
	// Tools are the only tools the token may call; nil: every tool.
	Tools []string
	// ReadOnly tokens may call only tools whose effect is read.
	ReadOnly bool
}

// Token is an API token as its owner and admins see it (never its secret).
type Token struct {
	ID         uuid.UUID
	UserID     uuid.UUID
	Email      string
	Kind       TokenKind
	Name       string
	Connector  bool
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	// Tools is nil when the token may call every tool.
	Tools    []string
	ReadOnly bool
}

// Live reports whether the token still authenticates at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(now))
}

// Limits on a token's scope.
const (
	maxScopeTools   = 100
	maxToolNameSize = 200
)

// validate checks a new token's fields against now, naming every field at
// fault.
func (nt *NewToken) validate(now time.Time) error {
	var fields []apperr.FieldError
	if nt.Kind != TokenAgent && nt.Kind != TokenUser {
		fields = append(fields, apperr.FieldError{Field: "kind", Message: "must be agent or user"})
	}
	nt.Name = strings.TrimSpace(nt.Name)
	if nt.Name == "" || utf8.RuneCountInString(nt.Name) > 100 || !utf8.ValidString(nt.Name) || strings.ContainsRune(nt.Name, 0) {
		fields = append(fields, apperr.FieldError{Field: "name", Message: "must have 1 to 100 characters"})
	}
	if nt.ExpiresAt != nil && !nt.ExpiresAt.After(now) {
		fields = append(fields, apperr.FieldError{Field: "expires_at", Message: "must be in the future"})
	}
	if nt.Tools != nil {
		tools := make([]string, 0, len(nt.Tools))
		for _, t := range nt.Tools {
			t = strings.TrimSpace(t)
			if t == "" || len(t) > maxToolNameSize || !utf8.ValidString(t) || strings.ContainsRune(t, 0) {
				fields = append(fields, apperr.FieldError{Field: "tools", Message: "each tool must be a tool's name"})
				break
			}
			if !slices.Contains(tools, t) {
				tools = append(tools, t)
			}
		}
		if len(tools) > maxScopeTools {
			fields = append(fields, apperr.FieldError{Field: "tools", Message: fmt.Sprintf("at most %d tools", maxScopeTools)})
		}
		slices.Sort(tools)
		nt.Tools = tools
	}
	if len(fields) == 0 {
		return nil
	}
	msgs := make([]string, len(fields))
	for i, f := range fields {
		msgs[i] = f.Field + " " + f.Message
	}
	return apperr.Invalid("The token is invalid: "+strings.Join(msgs, "; ")+".", fields...)
}

// IssueToken creates an API token for the actor themselves, in person (a
// browser session or the system; never an agent). The secret is returned
// once; only its SHA-256 is stored. It is audited as token.created.
func (s *Service) IssueToken(ctx context.Context, actor Principal, nt NewToken) (string, Token, error) {
	if actor.IsAgent() || actor.UserID == uuid.Nil {
		return "", Token{}, apperr.Errorf(apperr.EFORBIDDEN, "Tokens are created by their user in person.")
	}
	return s.issueToken(ctx, actor, actor, nt, false, time.Now())
}

func (s *Service) issueToken(ctx context.Context, actor, owner Principal, nt NewToken, connector bool, now time.Time) (string, Token, error) {
	if err := nt.validate(now); err != nil {
		return "", Token{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", Token{}, fmt.Errorf("auth: token: %w", err)
	}
	secret := tokenPrefix + string(nt.Kind[0]) + "_" + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(secret))
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", Token{}, fmt.Errorf("auth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	row, err := q.CreateAPIToken(ctx, db.CreateAPITokenParams{
		WorkspaceID: owner.WorkspaceID, UserID: owner.UserID, Kind: string(nt.Kind), Name: nt.Name, TokenHash: sum[:], Connector: connector,
		ExpiresAt: nt.ExpiresAt, ScopeTools: nt.Tools, ScopeReadOnly: nt.ReadOnly,
	})
	if err != nil {
		return "", Token{}, fmt.Errorf("auth: store token: %w", err)
	}
	tok := Token{ID: row.ID, UserID: owner.UserID, Email: owner.Email, Kind: nt.Kind, Name: nt.Name, Connector: connector,
		CreatedAt: row.CreatedAt, ExpiresAt: nt.ExpiresAt, Tools: nt.Tools, ReadOnly: nt.ReadOnly}
	data := map[string]any{"kind": nt.Kind, "name": nt.Name, "owner": owner.Email, "read_only": nt.ReadOnly}
	if nt.ExpiresAt != nil {
		data["expires_at"] = nt.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if nt.Tools != nil {
		data["tools"] = nt.Tools
	}
	if err := audit.Record(ctx, q, actor, owner.WorkspaceID, "token.created", "api_token", row.ID.String(), data); err != nil {
		return "", Token{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", Token{}, fmt.Errorf("auth: commit: %w", err)
	}
	return secret, tok, nil
}

// ListTokens lists the tokens of the actor's workspace, newest first:
// only the actor's own unless all is set, which admins (in person) and
// the system may ask for.
func (s *Service) ListTokens(ctx context.Context, actor Principal, all bool) ([]Token, error) {
	owner := uuid.NullUUID{UUID: actor.UserID, Valid: true}
	if all {
		if !actor.IsSystem() && !(actor.IsAdmin() && !actor.IsAgent()) {
			return nil, apperr.Errorf(apperr.EFORBIDDEN, "Only admins see every token.")
		}
		owner = uuid.NullUUID{}
	}
	rows, err := s.q.ListAPITokens(ctx, db.ListAPITokensParams{WorkspaceID: actor.WorkspaceID, UserID: owner})
	if err != nil {
		return nil, fmt.Errorf("auth: list tokens: %w", err)
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = Token{ID: r.ID, UserID: r.UserID, Email: r.Email, Kind: TokenKind(r.Kind), Name: r.Name, Connector: r.Connector,
			CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, Tools: r.ScopeTools, ReadOnly: r.ScopeReadOnly}
	}
	return out, nil
}

// ListTokensOf lists the tokens of the user with that email in the
// workspace (the command line).
func (s *Service) ListTokensOf(ctx context.Context, workspaceID uuid.UUID, email string) ([]Token, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	m, err := s.q.GetMemberByEmail(ctx, db.GetMemberByEmailParams{WorkspaceID: workspaceID, Email: email})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.ENOTFOUND, "No member of the workspace has the email %s.", email)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: get member: %w", err)
	}
	return s.ListTokens(ctx, Principal{UserID: m.UserID, WorkspaceID: workspaceID}, false)
}

// RevokeTokenAs revokes a token of the actor's workspace: their own, or
// any for admins in person and the system. Someone else's token is not
// found. It is audited as token.revoked, and stops working at once on this
// instance (within TokenCacheTTL on others).
func (s *Service) RevokeTokenAs(ctx context.Context, actor Principal, id uuid.UUID) error {
	if actor.IsAgent() {
		return apperr.Errorf(apperr.EFORBIDDEN, "Tokens are revoked by their user in person or by an admin.")
	}
	notFound := apperr.Errorf(apperr.ENOTFOUND, "No live token has that id.")
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("auth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	t, err := q.GetAPIToken(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound
	}
	if err != nil {
		return fmt.Errorf("auth: get token: %w", err)
	}
	if t.WorkspaceID != actor.WorkspaceID || (t.UserID != actor.UserID && !actor.IsAdmin() && !actor.IsSystem()) {
		return notFound
	}
	n, err := q.RevokeAPIToken(ctx, id)
	if err != nil {
		return fmt.Errorf("auth: revoke token: %w", err)
	}
	if n == 0 {
		return notFound
	}
	if err := audit.Record(ctx, q, actor, actor.WorkspaceID, "token.revoked", "api_token", id.String(),
		map[string]any{"kind": t.Kind, "name": t.Name, "owner_id": t.UserID.String()}); err != nil {
		return err
	}
	// Every instance forgets the token when the revocation commits (see
	// TokenRevokedEvent); the cache's TTL bounds it if a message is lost.
	if err := q.Notify(ctx, TokenRevokedEvent+id.String()); err != nil {
		return fmt.Errorf("auth: notify revocation: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("auth: commit: %w", err)
	}
	s.tokens.forget(func(p Principal) bool { return p.TokenID == id })
	return nil
}
