// Package oauth makes Gatehouse the OAuth 2.1 authorization server of its
// own MCP endpoint, as the MCP authorization specification (2025-11-25)
// expects: dynamic client registration (RFC 7591, public clients only),
// the authorization code grant with PKCE S256 only, resource indicators
// (RFC 8707: every token is bound to this server's /mcp) and refresh
// tokens that rotate.
//
// A consent becomes one agent token (an api_tokens row), listed and
// revoked on /tokens like any other: its bearer secret is the access
// token, an hour long, and a refresh gives the row a new secret. Every
// secret (code, access token, refresh token) is stored as its SHA-256 only.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
)

// Lifetimes.
const (
	// CodeTTL is how long an authorization code may be exchanged (the
	// specification's limit is ten minutes).
	CodeTTL = 5 * time.Minute
	// AccessTTL is how long an access token works.
	AccessTTL = time.Hour
	// RefreshTTL is how long a refresh token works; each refresh issues
	// the next one, and moves the grant's end with it.
	RefreshTTL = 30 * 24 * time.Hour
)

// Error codes of RFC 6749 (§4.1.2.1, §5.2), RFC 7591 (§3.2.2) and RFC
// 8707 (§2).
const (
	ErrInvalidRequest          = "invalid_request"
	ErrInvalidClient           = "invalid_client"
	ErrInvalidGrant            = "invalid_grant"
	ErrUnsupportedGrantType    = "unsupported_grant_type"
	ErrUnsupportedResponseType = "unsupported_response_type"
	ErrAccessDenied            = "access_denied"
	ErrInvalidTarget           = "invalid_target"
	ErrInvalidRedirectURI      = "invalid_redirect_uri"
	ErrInvalidClientMetadata   = "invalid_client_metadata"
	ErrTemporarilyUnavailable  = "temporarily_unavailable"
)

// Error is an OAuth error answer: its code, a description safe to show
// the client, and the HTTP status the token and registration endpoints
// send it with (an authorization error travels in a redirect instead).
type Error struct {
	Code        string
	Description string
	Status      int
	// RetryAfter is the seconds to wait (a registration over its rate).
	RetryAfter int
}

func (e *Error) Error() string { return "oauth: " + e.Code + ": " + e.Description }

func oauthError(status int, code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...), Status: status}
}

func badRequest(code, format string, args ...any) *Error {
	return oauthError(http.StatusBadRequest, code, format, args...)
}

// Site is where this server is reached, as a request found it: the issuer
// (its origin, "https://gatehouse.example.com") and the one resource its
// tokens are for, the /mcp endpoint's URL.
type Site struct {
	Issuer   string
	Resource string
}

// SiteAt is the site of a server reached at origin (scheme://host[:port]).
func SiteAt(origin string) Site {
	return Site{Issuer: origin, Resource: origin + "/mcp"}
}

// Endpoint paths, under the issuer.
const (
	AuthorizePath = "/oauth/authorize"
	TokenPath     = "/oauth/token"
	RegisterPath  = "/oauth/register"
	// ResourceMetadataPath is where the protected resource metadata of
	// /mcp stands (RFC 9728 §3: the well-known path inserted before the
	// resource's path).
	ResourceMetadataPath = "/.well-known/oauth-protected-resource/mcp"
)

// ResourceMetadataURL is the protected resource metadata's URL, named in
// the 401 of /mcp.
func (s Site) ResourceMetadataURL() string { return s.Issuer + ResourceMetadataPath }

// TokenRevoker forgets a revoked or rotated token at once on this
// instance (auth.Service.ForgetToken); other instances hear of a
// revocation by notification.
type TokenRevoker interface {
	ForgetToken(id uuid.UUID)
}

// Service is the authorization server.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	tokens TokenRevoker
}

// NewService returns the authorization server on pool. It keeps no state
// of its own: every instance may answer every step.
func NewService(pool *pgxpool.Pool, tokens TokenRevoker) *Service {
	return &Service{pool: pool, q: db.New(pool), tokens: tokens}
}

// Secret prefixes: Gatehouse tokens start with gh_ so secret scanners can
// recognise them (an access token is a bearer token like any other).
const (
	accessPrefix  = "gh_o_"
	refreshPrefix = "gh_r_"
)

// newSecret is a random secret (256 bits) with its prefix, and its
// SHA-256, the only form it is stored in.
func newSecret(prefix string) (string, []byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, fmt.Errorf("oauth: secret: %w", err)
	}
	secret := prefix + base64.RawURLEncoding.EncodeToString(raw)
	return secret, hashSecret(secret), nil
}

func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}
