package oauth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// TokenRequest is a request to the token endpoint (RFC 6749 §4.1.3, §6).
type TokenRequest struct {
	GrantType    string
	ClientID     string
	Code         string
	RedirectURI  string
	CodeVerifier string
	RefreshToken string
	Resource     string
}

// TokenResponse is the token endpoint's answer (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	// Scope says what the person granted: "mcp" (every tool) or
	// "mcp:read" (tools that read).
	Scope string `json:"scope"`
}

func scopeOf(readOnly bool) string {
	if readOnly {
		return "mcp:read"
	}
	return "mcp"
}

// maxSecretSize bounds codes and tokens read from a request before they
// are hashed.
const maxSecretSize = 200

// Token answers the token endpoint: the authorization code grant (with
// its PKCE verifier) or a refresh. Every refusal is an *Error with RFC
// 6749's code and status. A refusal writes nothing, except where OAuth
// 2.1 asks for a revocation: a code exchanged twice, or a refresh token
// used twice, revokes the grant it issued.
func (s *Service) Token(ctx context.Context, site Site, r TokenRequest, now time.Time) (TokenResponse, error) {
	if r.ClientID == "" {
		return TokenResponse{}, badRequest(ErrInvalidRequest, "client_id is required.")
	}
	if r.Resource != "" && !SameResource(r.Resource, site.Resource) {
		return TokenResponse{}, badRequest(ErrInvalidTarget, "resource must be this server's MCP endpoint, %s.", site.Resource)
	}
	switch r.GrantType {
	case "authorization_code":
		return s.exchangeCode(ctx, site, r, now)
	case "refresh_token":
		return s.refresh(ctx, site, r, now)
	case "":
		return TokenResponse{}, badRequest(ErrInvalidRequest, "grant_type is required.")
	}
	return TokenResponse{}, badRequest(ErrUnsupportedGrantType, "Only the authorization_code and refresh_token grants are supported.")
}

var errBadCode = badRequest(ErrInvalidGrant, "The authorization code is invalid, expired or used, or was issued to another client or redirect URI.")

// beginFor reads the client a token request names (401 invalid_client for
// none) and begins the transaction the request is answered in.
func (s *Service) beginFor(ctx context.Context, clientID string) (Client, pgx.Tx, error) {
	client, ok, err := s.client(ctx, s.q, clientID)
	if err != nil {
		return Client{}, nil, err
	}
	if !ok {
		return Client{}, nil, oauthError(http.StatusUnauthorized, ErrInvalidClient, "client_id names no registered client.")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Client{}, nil, fmt.Errorf("oauth: begin: %w", err)
	}
	return client, tx, nil
}

func (s *Service) exchangeCode(ctx context.Context, site Site, r TokenRequest, now time.Time) (TokenResponse, error) {
	switch {
	case r.Code == "":
		return TokenResponse{}, badRequest(ErrInvalidRequest, "code is required.")
	case r.CodeVerifier == "":
		return TokenResponse{}, badRequest(ErrInvalidRequest, "code_verifier is required (PKCE).")
	case r.RedirectURI == "":
		return TokenResponse{}, badRequest(ErrInvalidRequest, "redirect_uri is required.")
	case len(r.Code) > maxSecretSize || !utf8.ValidString(r.Code):
		return TokenResponse{}, errBadCode
	}
	client, tx, err := s.beginFor(ctx, r.ClientID)
	if err != nil {
		return TokenResponse{}, err
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	code, err := q.GetOAuthCodeForUpdate(ctx, hashSecret(r.Code))
	if isNoRows(err) {
		return TokenResponse{}, errBadCode
	}
	if err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: get code: %w", err)
	}
	if code.UsedAt != nil {
		// Used before: whoever holds it now may have stolen it. What it
		// issued is revoked (OAuth 2.1 §4.1.3).
		if code.TokenID.Valid {
			if err := s.revokeGrant(ctx, q, code.WorkspaceID, code.TokenID.UUID, "authorization code used twice"); err != nil {
				return TokenResponse{}, err
			}
			if err := tx.Commit(ctx); err != nil {
				return TokenResponse{}, fmt.Errorf("oauth: commit: %w", err)
			}
			s.tokens.ForgetToken(code.TokenID.UUID)
		}
		return TokenResponse{}, errBadCode
	}
	switch {
	case code.ClientID != client.ID, code.RedirectUri != r.RedirectURI, !now.Before(code.ExpiresAt):
		return TokenResponse{}, errBadCode
	case !VerifyPKCE(r.CodeVerifier, code.CodeChallenge):
		return TokenResponse{}, badRequest(ErrInvalidGrant, "The code_verifier does not match the code_challenge (PKCE S256).")
	case !SameResource(code.Resource, site.Resource):
		// Issued for this server under another name.
		return TokenResponse{}, badRequest(ErrInvalidTarget, "The code was issued for another resource, %s.", code.Resource)
	}
	access, accessHash, err := newSecret(accessPrefix)
	if err != nil {
		return TokenResponse{}, err
	}
	refresh, refreshHash, err := newSecret(refreshPrefix)
	if err != nil {
		return TokenResponse{}, err
	}
	name := grantName(code.ClientName)
	tok, err := q.CreateOAuthGrantToken(ctx, db.CreateOAuthGrantTokenParams{
		WorkspaceID: code.WorkspaceID, UserID: code.UserID, Name: name, TokenHash: accessHash,
		ExpiresAt: now.Add(RefreshTTL), ScopeReadOnly: code.ReadOnly, OauthClientID: client.ID, Audience: code.Resource,
		SecretExpiresAt: now.Add(AccessTTL), ConversationID: code.ConversationID, NotebookID: code.NotebookID,
	})
	if err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: store grant: %w", err)
	}
	if err := q.CreateOAuthRefreshToken(ctx, db.CreateOAuthRefreshTokenParams{TokenHash: refreshHash, TokenID: tok.ID, CreatedAt: now, ExpiresAt: now.Add(RefreshTTL)}); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: store refresh token: %w", err)
	}
	if err := q.UseOAuthCode(ctx, db.UseOAuthCodeParams{CodeHash: code.CodeHash, TokenID: nullUUID(tok.ID)}); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: use code: %w", err)
	}
	// The person approved at consent: the grant is audited as theirs.
	person := auth.Principal{UserID: code.UserID, WorkspaceID: code.WorkspaceID, Email: code.Email}
	data := map[string]any{"kind": auth.TokenAgent, "name": name, "owner": code.Email, "read_only": code.ReadOnly,
		"oauth_client_id": client.ID.String(), "audience": code.Resource, "expires_at": now.Add(RefreshTTL).UTC().Format(time.RFC3339)}
	if code.ConversationID.Valid {
		data["conversation_id"] = code.ConversationID.UUID.String()
	}
	if code.NotebookID.Valid {
		data["notebook_id"] = code.NotebookID.UUID.String()
	}
	if err := audit.Record(ctx, q, person, code.WorkspaceID, "token.created", "api_token", tok.ID.String(), data); err != nil {
		return TokenResponse{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: commit: %w", err)
	}
	return TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(AccessTTL.Seconds()), RefreshToken: refresh, Scope: scopeOf(code.ReadOnly)}, nil
}

var errBadRefresh = badRequest(ErrInvalidGrant, "The refresh token is invalid, expired, revoked or used, or was issued to another client.")

func (s *Service) refresh(ctx context.Context, site Site, r TokenRequest, now time.Time) (TokenResponse, error) {
	if r.RefreshToken == "" {
		return TokenResponse{}, badRequest(ErrInvalidRequest, "refresh_token is required.")
	}
	if len(r.RefreshToken) > maxSecretSize || !strings.HasPrefix(r.RefreshToken, refreshPrefix) {
		return TokenResponse{}, errBadRefresh
	}
	client, tx, err := s.beginFor(ctx, r.ClientID)
	if err != nil {
		return TokenResponse{}, err
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	rt, err := q.GetOAuthRefreshTokenForUpdate(ctx, hashSecret(r.RefreshToken))
	if isNoRows(err) {
		return TokenResponse{}, errBadRefresh
	}
	if err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: get refresh token: %w", err)
	}
	switch {
	case rt.OauthClientID.UUID != client.ID, rt.RevokedAt != nil:
		return TokenResponse{}, errBadRefresh
	case rt.RotatedAt != nil:
		// Used before: the client and whoever copied it hold the same
		// token, and there is no telling which is which. The grant ends
		// (OAuth 2.1 §4.3.1).
		if err := s.revokeGrant(ctx, q, rt.WorkspaceID, rt.TokenID, "refresh token used twice"); err != nil {
			return TokenResponse{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return TokenResponse{}, fmt.Errorf("oauth: commit: %w", err)
		}
		s.tokens.ForgetToken(rt.TokenID)
		return TokenResponse{}, errBadRefresh
	case !now.Before(rt.ExpiresAt):
		return TokenResponse{}, errBadRefresh
	case !SameResource(rt.Audience.String, site.Resource):
		return TokenResponse{}, badRequest(ErrInvalidTarget, "The grant is for another resource, %s.", rt.Audience.String)
	}
	access, accessHash, err := newSecret(accessPrefix)
	if err != nil {
		return TokenResponse{}, err
	}
	refresh, refreshHash, err := newSecret(refreshPrefix)
	if err != nil {
		return TokenResponse{}, err
	}
	if err := q.MarkOAuthRefreshTokenRotated(ctx, rt.TokenHash); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: rotate refresh token: %w", err)
	}
	n, err := q.RotateOAuthGrantSecret(ctx, db.RotateOAuthGrantSecretParams{ID: rt.TokenID, TokenHash: accessHash, SecretExpiresAt: now.Add(AccessTTL), ExpiresAt: now.Add(RefreshTTL)})
	if err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: rotate access token: %w", err)
	}
	if n == 0 {
		return TokenResponse{}, errBadRefresh
	}
	if err := q.CreateOAuthRefreshToken(ctx, db.CreateOAuthRefreshTokenParams{TokenHash: refreshHash, TokenID: rt.TokenID, CreatedAt: now, ExpiresAt: now.Add(RefreshTTL)}); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: store refresh token: %w", err)
	}
	if err := q.PruneOAuthRefreshTokens(ctx, rt.TokenID); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: prune refresh tokens: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: commit: %w", err)
	}
	// The old access token stops here at once (other instances within
	// auth.TokenCacheTTL).
	s.tokens.ForgetToken(rt.TokenID)
	return TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(AccessTTL.Seconds()), RefreshToken: refresh, Scope: scopeOf(rt.ScopeReadOnly)}, nil
}

// revokeGrant revokes a grant's token in the caller's transaction, as the
// system of its workspace, audited with why, and tells every instance.
func (s *Service) revokeGrant(ctx context.Context, q *db.Queries, workspaceID, tokenID uuid.UUID, why string) error {
	n, err := q.RevokeAPIToken(ctx, tokenID)
	if err != nil {
		return fmt.Errorf("oauth: revoke grant: %w", err)
	}
	if n == 0 {
		return nil // revoked already
	}
	if err := audit.Record(ctx, q, auth.System(workspaceID), workspaceID, "token.revoked", "api_token", tokenID.String(),
		map[string]any{"kind": auth.TokenAgent, "reason": why}); err != nil {
		return err
	}
	if err := q.Notify(ctx, auth.TokenRevokedEvent+tokenID.String()); err != nil {
		return fmt.Errorf("oauth: notify revocation: %w", err)
	}
	return nil
}

// grantName names a grant's token after its client: "OAuth: <name>",
// within the 100 characters a token's name may have.
func grantName(client string) string {
	if client == "" {
		client = "unnamed client"
	}
	const prefix = "OAuth: "
	if r := []rune(client); len(r) > 100-len(prefix) {
		client = string(r[:100-len(prefix)-1]) + "…"
	}
	return prefix + client
}
