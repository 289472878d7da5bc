package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Request is an authorization request (RFC 6749 §4.1.1 with PKCE and a
// resource indicator) as the client sent it.
type Request struct {
	ResponseType        string
	ClientID            string
	RedirectURI         string
	State               string
	CodeChallenge       string
	CodeChallengeMethod string
	Resource            string
	Scope               string
	// Repeated names the parameters sent more than once (§3.1: they must
	// not be).
	Repeated []string
}

// requestParams are the parameters of a Request, by name.
var requestParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "resource", "scope"}

// ParseRequest reads an authorization request from its parameters (the
// query of GET /oauth/authorize, the consent form's hidden fields).
func ParseRequest(v url.Values) Request {
	r := Request{
		ResponseType: v.Get("response_type"), ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"),
		State: v.Get("state"), CodeChallenge: v.Get("code_challenge"), CodeChallengeMethod: v.Get("code_challenge_method"),
		Resource: v.Get("resource"), Scope: v.Get("scope"),
	}
	for _, name := range requestParams {
		if len(v[name]) > 1 {
			r.Repeated = append(r.Repeated, name)
		}
	}
	return r
}

// Values are the request's parameters, for the consent form to send back.
func (r Request) Values() url.Values {
	v := url.Values{}
	for name, val := range map[string]string{
		"response_type": r.ResponseType, "client_id": r.ClientID, "redirect_uri": r.RedirectURI, "state": r.State,
		"code_challenge": r.CodeChallenge, "code_challenge_method": r.CodeChallengeMethod, "resource": r.Resource, "scope": r.Scope,
	} {
		if val != "" {
			v.Set(name, val)
		}
	}
	return v
}

// Pending is an authorization request checked against its client: what
// the consent page shows and the consent binds the code to.
type Pending struct {
	Request Request
	Client  Client
	// Resource is the resource the token will be bound to, canonical.
	Resource string
	// Issuer is this server's issuer, sent back with the answer (RFC 9207).
	Issuer string
}

// RedirectHost is the host the answer goes back to.
func (p Pending) RedirectHost() string { return RedirectHost(p.Request.RedirectURI) }

// Redirect is the URL that answers the request: its redirect URI with
// params, the state and the issuer added to its query.
func (p Pending) Redirect(params url.Values) string {
	u, err := url.Parse(p.Request.RedirectURI)
	if err != nil {
		return "" // checked already: CheckRedirectURI parsed it
	}
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	if p.Request.State != "" {
		q.Set("state", p.Request.State)
	}
	q.Set("iss", p.Issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// ErrorRedirect is the URL that answers the request with an error (RFC
// 6749 §4.1.2.1).
func (p Pending) ErrorRedirect(e *Error) string {
	return p.Redirect(url.Values{"error": {e.Code}, "error_description": {e.Description}})
}

// errUnknownClient and errBadRedirect are the authorization errors that
// cannot be sent back to the client (§4.1.2.1: never redirect to a URI
// that was not registered); the browser is shown them instead.
var (
	errUnknownClient = apperr.Errorf(apperr.EBADREQ, "This authorization request comes from a client that is not registered here (client_id is missing or unknown). Go back to the application and connect again.")
	errBadRedirect   = apperr.Errorf(apperr.EBADREQ, "This authorization request names a redirect_uri its client did not register, so Gatehouse will not send you there. Go back to the application and connect again.")
	errRepeated      = apperr.Errorf(apperr.EBADREQ, "This authorization request names its client_id or redirect_uri more than once.")
)

// CheckRequest checks an authorization request for site. An unknown
// client, a missing or unregistered redirect URI is an apperr error
// (EBADREQ), shown to the person and never redirected. Anything else
// wrong is an *Error, returned with the Pending request whose
// ErrorRedirect answers it. Nothing is written.
func (s *Service) CheckRequest(ctx context.Context, site Site, r Request) (Pending, error) {
	for _, name := range r.Repeated {
		if name == "client_id" || name == "redirect_uri" {
			return Pending{}, errRepeated
		}
	}
	client, ok, err := s.client(ctx, s.q, r.ClientID)
	if err != nil {
		return Pending{}, err
	}
	if !ok {
		return Pending{}, errUnknownClient
	}
	if !MatchRedirectURI(client.RedirectURIs, r.RedirectURI) {
		return Pending{}, errBadRedirect
	}
	p := Pending{Request: r, Client: client, Issuer: site.Issuer}
	if len(r.Repeated) > 0 {
		return p, badRequest(ErrInvalidRequest, "Parameters sent more than once: %s.", strings.Join(r.Repeated, ", "))
	}
	if r.ResponseType != "code" {
		return p, badRequest(ErrUnsupportedResponseType, "Only response_type=code is supported.")
	}
	if len(r.State) > maxStateSize {
		return p, badRequest(ErrInvalidRequest, "state may have at most %d characters.", maxStateSize)
	}
	switch {
	case r.CodeChallenge == "":
		return p, badRequest(ErrInvalidRequest, "PKCE is required: send code_challenge with code_challenge_method=S256.")
	case r.CodeChallengeMethod != "S256":
		return p, badRequest(ErrInvalidRequest, "Only the S256 code_challenge_method is accepted (plain is not).")
	case !codeChallenge.MatchString(r.CodeChallenge):
		return p, badRequest(ErrInvalidRequest, "code_challenge must be the %d-character base64url SHA-256 of the code verifier.", challengeS256Len)
	}
	// A client of an older revision may send no resource: the token is
	// bound to the only one there is, this server's /mcp.
	resource := site.Resource
	if r.Resource != "" && !SameResource(r.Resource, site.Resource) {
		return p, badRequest(ErrInvalidTarget, "resource must be this server's MCP endpoint, %s.", site.Resource)
	}
	p.Resource, _ = CanonicalResource(resource)
	return p, nil
}

// Consent is what the person chose on the consent page.
type Consent struct {
	// ReadOnly limits the token to tools that read.
	ReadOnly bool
	// Conversation or Notebook (at most one) is where the sessions' calls
	// are proposed; neither: a new conversation per session. The caller
	// checks that it is the person's own.
	Conversation uuid.UUID
	Notebook     uuid.UUID
}

// Approve issues an authorization code for a checked request that the
// signed-in person approved, bound to the client, the redirect URI, the
// PKCE challenge, the resource, the person and their choices. It returns
// the redirect that carries the code back to the client.
func (s *Service) Approve(ctx context.Context, person auth.Principal, p Pending, c Consent, now time.Time) (string, error) {
	if person.UserID == uuid.Nil || person.TokenKind != "" {
		return "", apperr.Errorf(apperr.EFORBIDDEN, "Only a signed-in person approves a client.")
	}
	if c.Conversation != uuid.Nil && c.Notebook != uuid.Nil {
		return "", apperr.Invalid("Choose a conversation or a notebook, not both.", apperr.FieldError{Field: "target", Message: "choose one"})
	}
	code, hash, err := newSecret("")
	if err != nil {
		return "", err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("oauth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if _, err := q.PruneOAuthCodes(ctx); err != nil {
		return "", fmt.Errorf("oauth: prune codes: %w", err)
	}
	if err := q.CreateOAuthCode(ctx, db.CreateOAuthCodeParams{
		CodeHash: hash, ClientID: p.Client.ID, WorkspaceID: person.WorkspaceID, UserID: person.UserID,
		RedirectUri: p.Request.RedirectURI, CodeChallenge: p.Request.CodeChallenge, Resource: p.Resource, ReadOnly: c.ReadOnly,
		ConversationID: nullUUID(c.Conversation), NotebookID: nullUUID(c.Notebook),
		CreatedAt: now, ExpiresAt: now.Add(CodeTTL),
	}); err != nil {
		return "", fmt.Errorf("oauth: store code: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("oauth: commit: %w", err)
	}
	return p.Redirect(url.Values{"code": {code}}), nil
}

// Deny is the redirect that tells the client the person said no.
func (p Pending) Deny() string {
	return p.ErrorRedirect(&Error{Code: ErrAccessDenied, Description: "The person denied the request."})
}

func nullUUID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
