package oauth

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Client is a registered client. Its name and redirect URIs are what it
// said of itself: nothing is verified.
type Client struct {
	ID           uuid.UUID
	Name         string
	RedirectURIs []string
	CreatedAt    time.Time
}

func clientFromRow(r db.OauthClient) Client {
	return Client{ID: r.ID, Name: r.ClientName, RedirectURIs: r.RedirectUris, CreatedAt: r.CreatedAt}
}

// Registration is open to anyone, so it is braked: per client address
// (an IPv6 address by its /64) and for the whole server, in fixed windows
// counted in PostgreSQL (so across instances).
const (
	registerWindow         = time.Hour
	registrationsPerClient = 20
	registrationsPerServer = 1000
)

// CheckRegistration checks a client's registration request (RFC 7591
// §2): public clients only (token_endpoint_auth_method none), the
// authorization code and refresh token grants, 1 to MaxRedirectURIs
// redirect URIs (see CheckRedirectURI) and a name of at most
// MaxClientName characters. Other metadata is ignored (§2: the server
// may), and never stored or shown. It returns the cleaned metadata, as
// the answer repeats it.
func CheckRegistration(m oauthex.ClientRegistrationMetadata) (oauthex.ClientRegistrationMetadata, *Error) {
	var out oauthex.ClientRegistrationMetadata
	if len(m.RedirectURIs) == 0 {
		return out, badRequest(ErrInvalidRedirectURI, "redirect_uris is required: at least one redirect URI.")
	}
	if len(m.RedirectURIs) > MaxRedirectURIs {
		return out, badRequest(ErrInvalidRedirectURI, "At most %d redirect URIs may be registered.", MaxRedirectURIs)
	}
	for i, u := range m.RedirectURIs {
		if why := CheckRedirectURI(u); why != "" {
			return out, badRequest(ErrInvalidRedirectURI, "redirect_uris[%d] %s.", i, why)
		}
		if !slices.Contains(out.RedirectURIs, u) {
			out.RedirectURIs = append(out.RedirectURIs, u)
		}
	}
	switch m.TokenEndpointAuthMethod {
	case "", "none":
	default:
		return out, badRequest(ErrInvalidClientMetadata, "Only public clients are registered: token_endpoint_auth_method must be \"none\" (PKCE protects the code).")
	}
	out.TokenEndpointAuthMethod = "none"
	out.GrantTypes = []string{"authorization_code", "refresh_token"}
	for _, g := range m.GrantTypes {
		if !slices.Contains(out.GrantTypes, g) {
			return out, badRequest(ErrInvalidClientMetadata, "grant_types may hold only authorization_code and refresh_token.")
		}
	}
	out.ResponseTypes = []string{"code"}
	for _, r := range m.ResponseTypes {
		if r != "code" {
			return out, badRequest(ErrInvalidClientMetadata, "response_types may hold only code.")
		}
	}
	name, ok := cleanClientName(m.ClientName)
	if !ok {
		return out, badRequest(ErrInvalidClientMetadata, "client_name must have at most %d characters, without control characters.", MaxClientName)
	}
	out.ClientName = name
	switch m.ApplicationType {
	case "", "web", "native":
		out.ApplicationType = m.ApplicationType
	default:
		return out, badRequest(ErrInvalidClientMetadata, "application_type must be web or native.")
	}
	return out, nil
}

// Register registers a client from address (the client's IP address, for
// the brake). Bad metadata is refused with RFC 7591's errors and writes
// nothing; a client over the brake gets 429.
func (s *Service) Register(ctx context.Context, m oauthex.ClientRegistrationMetadata, address string, now time.Time) (oauthex.ClientRegistrationResponse, error) {
	meta, oerr := CheckRegistration(m)
	if oerr != nil {
		return oauthex.ClientRegistrationResponse{}, oerr
	}
	start := now.Truncate(registerWindow)
	for _, b := range []struct {
		key   string
		limit int
	}{{"oauth:register:" + auth.BrakeAddress(address), registrationsPerClient}, {"oauth:register", registrationsPerServer}} {
		n, err := s.q.CountRate(ctx, db.CountRateParams{Bucket: b.key, WindowStart: start, ExpiresAt: start.Add(registerWindow)})
		if err != nil {
			return oauthex.ClientRegistrationResponse{}, fmt.Errorf("oauth: registration brake: %w", err)
		}
		if int(n) > b.limit {
			e := oauthError(http.StatusTooManyRequests, ErrTemporarilyUnavailable, "Too many clients registered; try again later.")
			e.RetryAfter = int(start.Add(registerWindow).Sub(now).Seconds()) + 1
			return oauthex.ClientRegistrationResponse{}, e
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return oauthex.ClientRegistrationResponse{}, fmt.Errorf("oauth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if _, err := q.PruneOAuthClients(ctx); err != nil {
		return oauthex.ClientRegistrationResponse{}, fmt.Errorf("oauth: prune clients: %w", err)
	}
	row, err := q.CreateOAuthClient(ctx, db.CreateOAuthClientParams{ClientName: meta.ClientName, RedirectUris: meta.RedirectURIs})
	if err != nil {
		return oauthex.ClientRegistrationResponse{}, fmt.Errorf("oauth: register client: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return oauthex.ClientRegistrationResponse{}, fmt.Errorf("oauth: commit: %w", err)
	}
	return oauthex.ClientRegistrationResponse{ClientRegistrationMetadata: meta, ClientID: row.ID.String(), ClientIDIssuedAt: row.CreatedAt}, nil
}

// client reads a registered client by the client_id a request sent; false
// when it names none.
func (s *Service) client(ctx context.Context, q *db.Queries, clientID string) (Client, bool, error) {
	id, err := uuid.Parse(clientID)
	if err != nil || len(clientID) != 36 {
		return Client{}, false, nil
	}
	row, err := q.GetOAuthClient(ctx, id)
	if isNoRows(err) {
		return Client{}, false, nil
	}
	if err != nil {
		return Client{}, false, fmt.Errorf("oauth: get client: %w", err)
	}
	return clientFromRow(row), true, nil
}
