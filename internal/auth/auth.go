// Package auth owns who a caller is: users and their roles in a workspace,
// password sign-in, and API tokens for agents and scripts.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Role is a user's role in a workspace.
type Role string

// Roles, least to most privileged.
const (
	RoleMember   Role = "member"
	RoleApprover Role = "approver"
	RoleAdmin    Role = "admin"
)

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleMember, RoleApprover, RoleAdmin:
		return r, nil
	}
	return "", apperr.Invalid("role must be member, approver or admin", apperr.FieldError{Field: "role", Message: "must be member, approver or admin"})
}

// TokenKind says whom an API token acts for.
type TokenKind string

// Token kinds: an agent token acts for an agent on behalf of its owner; a
// user token acts as the user.
const (
	TokenAgent TokenKind = "agent"
	TokenUser  TokenKind = "user"
)

// DefaultWorkspaceSlug is the workspace created on first start.
const DefaultWorkspaceSlug = "default"

// Principal is the authenticated caller of one request.
type Principal struct {
	UserID      uuid.UUID
	Email       string
	WorkspaceID uuid.UUID
	Role        Role
	// TokenID and TokenKind are set for API tokens, empty for browser sessions.
	TokenID   uuid.UUID
	TokenKind TokenKind
	// TokenName names the agent (or script) for an API token.
	TokenName string
	// Connector marks a user token that a connector (a mail client, a
	// calendar) acts with: its judgments are weighed as a connector's
	// evidence, not the principal's. Agent tokens are never connectors.
	Connector bool
	// TokenScope narrows what the token may call (the decision's token
	// layer); nil for sessions and unscoped tokens. Never change it in
	// place: cached principals share it.
	TokenScope *policy.TokenScope
	// ApproverRoles are the named approver roles the user holds in the
	// workspace (finance-approver…), read when the request authenticated.
	// The resolving transaction reads them again from the rows.
	ApproverRoles []string
	// Audience is the resource an OAuth grant's token is bound to (RFC
	// 8707: this server's /mcp URL), accepted there only; "" for other
	// tokens and sessions.
	Audience string
	// Bound is the conversation or notebook the owner chose, at consent,
	// for the MCP sessions an OAuth grant's token opens; zero: none (each
	// session gets a new conversation).
	Bound TokenBinding
}

// TokenBinding is the scope a token's MCP sessions are proposed in when
// they name none: a conversation or a notebook, at most one.
type TokenBinding struct {
	Conversation uuid.UUID
	Notebook     uuid.UUID
}

// IsAgent reports whether the caller is an agent acting for its owner.
func (p Principal) IsAgent() bool { return p.TokenKind == TokenAgent }

// CanApprove reports whether the caller's role may resolve approval packets.
func (p Principal) CanApprove() bool { return p.Role == RoleApprover || p.Role == RoleAdmin }

// MayResolve reports whether the caller may resolve a packet that waits for
// role: "approver" needs the approver or admin role, "admin" the admin role,
// and any other (named) role only its holders, whatever their workspace
// role. Agents resolve nothing.
func (p Principal) MayResolve(role string) bool {
	if p.IsAgent() {
		return false
	}
	switch role {
	case string(RoleApprover):
		return p.CanApprove()
	case string(RoleAdmin):
		return p.IsAdmin()
	}
	return slices.Contains(p.ApproverRoles, role)
}

// IsAdmin reports whether the caller administers the workspace.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// CanResolveSome reports whether the caller may reach the approvals queue:
// their workspace role lets them approve, or they hold a named approver
// role (the queue then shows them the packets they may resolve).
func (p Principal) CanResolveSome() bool { return p.CanApprove() || len(p.ApproverRoles) > 0 }

// System is the principal of the command line and of background work in a
// workspace: no user and no token. It is audited as "system".
func System(workspaceID uuid.UUID) Principal { return Principal{WorkspaceID: workspaceID} }

// IsSystem reports whether the caller is the system of a workspace (see System).
func (p Principal) IsSystem() bool {
	return p.UserID == uuid.Nil && p.TokenID == uuid.Nil && p.WorkspaceID != uuid.Nil
}

// AuditIdentity is who acted, for the audit log (audit.Actor).
func (p Principal) AuditIdentity() (userID, tokenID uuid.UUID, agent bool) {
	return p.UserID, p.TokenID, p.IsAgent()
}

// Service is the auth service.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	params PasswordParams
	tokens tokenCache
}

// NewService returns an auth service that hashes new passwords with params.
func NewService(pool *pgxpool.Pool, params PasswordParams) *Service {
	s := &Service{pool: pool, q: db.New(pool), params: params}
	s.tokens.ttl.Store(int64(TokenCacheTTL))
	return s
}

// TokenCacheTTL is how long an authenticated token is believed without
// asking the database again: a revoked token (or a changed role) takes
// effect within it on every instance, with no message between them.
const TokenCacheTTL = time.Second

// tokenCache remembers authenticated tokens, by their hash, for a short
// time: an agent's burst of calls costs one lookup a second, not one a
// call. Entries are only ever read within their TTL.
type tokenCache struct {
	ttl atomic.Int64 // a time.Duration
	m   sync.Map     // [32]byte → cachedToken
}

type cachedToken struct {
	p       Principal
	expires time.Time
}

// forget drops the cached tokens that match, at once on this instance
// (other instances within the TTL).
func (c *tokenCache) forget(match func(Principal) bool) {
	c.m.Range(func(k, v any) bool {
		if match(v.(cachedToken).p) {
			c.m.Delete(k)
		}
		return true
	})
}

func (c *tokenCache) get(sum [32]byte, now time.Time) (cachedToken, bool) {
	v, ok := c.m.Load(sum)
	if !ok {
		return cachedToken{}, false
	}
	e := v.(cachedToken)
	if !now.Before(e.expires) {
		c.m.Delete(sum)
		return cachedToken{}, false
	}
	return e, true
}

// sweep drops expired entries so revoked or unused tokens do not pile up.
func (c *tokenCache) sweep(now time.Time) {
	c.m.Range(func(k, v any) bool {
		if !now.Before(v.(cachedToken).expires) {
			c.m.Delete(k)
		}
		return true
	})
}

// EnsureDefaultWorkspace creates the default workspace if it is missing.
func (s *Service) EnsureDefaultWorkspace(ctx context.Context) (uuid.UUID, error) {
	ws, err := s.q.EnsureWorkspace(ctx, db.EnsureWorkspaceParams{Slug: DefaultWorkspaceSlug, Name: "Default workspace"})
	if err != nil {
		return uuid.Nil, fmt.Errorf("auth: ensure default workspace: %w", err)
	}
	return ws.ID, nil
}

// NormalizeEmail lower-cases and validates an email address.
func NormalizeEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || len(email) > 254 {
		return "", apperr.Invalid("Enter a valid email address.", apperr.FieldError{Field: "email", Message: "must be a valid email address"})
	}
	return email, nil
}

// CreateUser adds a user with a password and a role in the workspace.
func (s *Service) CreateUser(ctx context.Context, workspaceID uuid.UUID, email, password string, role Role) (uuid.UUID, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return uuid.Nil, fmt.Errorf("auth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	id, err := s.createUser(ctx, s.q.WithTx(tx), workspaceID, email, password, role)
	if err != nil {
		return uuid.Nil, err
	}
	return id, tx.Commit(ctx)
}

func (s *Service) createUser(ctx context.Context, q *db.Queries, workspaceID uuid.UUID, email, password string, role Role) (uuid.UUID, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return uuid.Nil, err
	}
	if len([]rune(password)) < MinPasswordLength {
		return uuid.Nil, apperr.Invalid(fmt.Sprintf("The password must have at least %d characters.", MinPasswordLength),
			apperr.FieldError{Field: "password", Message: fmt.Sprintf("must have at least %d characters", MinPasswordLength)})
	}
	hash, err := HashPassword(password, s.params)
	if err != nil {
		return uuid.Nil, err
	}
	u, err := q.CreateUser(ctx, db.CreateUserParams{Email: email, PasswordHash: hash})
	if isUniqueViolation(err) {
		return uuid.Nil, apperr.Errorf(apperr.ECONFLICT, "A user with the email %s exists already.", email)
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("auth: create user: %w", err)
	}
	if err := q.AddWorkspaceMember(ctx, db.AddWorkspaceMemberParams{WorkspaceID: workspaceID, UserID: u.ID, Role: string(role)}); err != nil {
		return uuid.Nil, fmt.Errorf("auth: add member: %w", err)
	}
	return u.ID, nil
}

// dummyHash is checked when the email is unknown, so a wrong email costs as
// much time as a wrong password and does not reveal which users exist.
var dummyHash, _ = HashPassword("not a real password", DefaultPasswordParams)

// ErrBadCredentials is the one answer to a failed sign-in.
var ErrBadCredentials = apperr.Errorf(apperr.EUNAUTH, "The email or password is wrong.")

// Authenticate checks an email and password and returns the principal.
func (s *Service) Authenticate(ctx context.Context, email, password string) (Principal, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	// An email no user can have (PostgreSQL would refuse its bytes) is a
	// wrong email, at the same cost, never an error of ours.
	if len(email) > 254 || !utf8.ValidString(email) || strings.ContainsRune(email, 0) {
		CheckPassword(password, dummyHash)
		return Principal{}, ErrBadCredentials
	}
	u, err := s.q.GetUserByEmail(ctx, email)
	if errors.Is(err, pgx.ErrNoRows) {
		CheckPassword(password, dummyHash)
		return Principal{}, ErrBadCredentials
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: get user: %w", err)
	}
	if !CheckPassword(password, u.PasswordHash) {
		return Principal{}, ErrBadCredentials
	}
	return s.PrincipalForUser(ctx, u.ID)
}

// PrincipalForUser loads a signed-in user's principal (their role in their
// workspace). A user without a membership gets EUNAUTH.
func (s *Service) PrincipalForUser(ctx context.Context, userID uuid.UUID) (Principal, error) {
	m, err := s.q.GetMembership(ctx, userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, apperr.Errorf(apperr.EUNAUTH, "Sign in again.")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: membership: %w", err)
	}
	return Principal{UserID: m.UserID, Email: m.Email, WorkspaceID: m.WorkspaceID, Role: Role(m.Role), ApproverRoles: m.ApproverRoles}, nil
}

// SessionPrincipal loads the principal of a browser session that signed in
// at signedInAt: a session that signed in before its user's password last
// changed (gatehouse user reset-password) is over, EUNAUTH.
func (s *Service) SessionPrincipal(ctx context.Context, userID uuid.UUID, signedInAt time.Time) (Principal, error) {
	m, err := s.q.GetMembership(ctx, userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, apperr.Errorf(apperr.EUNAUTH, "Sign in again.")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: membership: %w", err)
	}
	if m.PasswordChangedAt != nil && signedInAt.Before(*m.PasswordChangedAt) {
		return Principal{}, apperr.Errorf(apperr.EUNAUTH, "The password changed: sign in again.")
	}
	return Principal{UserID: m.UserID, Email: m.Email, WorkspaceID: m.WorkspaceID, Role: Role(m.Role), ApproverRoles: m.ApproverRoles}, nil
}

// SetPassword gives the user with that email a new password (the command
// line's reset-password), ends every browser session that signed in before
// it, and audits user.password_reset. Their API tokens are left alone.
func (s *Service) SetPassword(ctx context.Context, workspaceID uuid.UUID, email, password string) error {
	email, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	if len([]rune(password)) < MinPasswordLength {
		return apperr.Invalid(fmt.Sprintf("The password must have at least %d characters.", MinPasswordLength),
			apperr.FieldError{Field: "password", Message: fmt.Sprintf("must have at least %d characters", MinPasswordLength)})
	}
	hash, err := HashPassword(password, s.params)
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("auth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	m, err := q.GetMemberByEmail(ctx, db.GetMemberByEmailParams{WorkspaceID: workspaceID, Email: email})
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.Errorf(apperr.ENOTFOUND, "No member of the workspace has the email %s.", email)
	}
	if err != nil {
		return fmt.Errorf("auth: get member: %w", err)
	}
	if _, err := q.SetPassword(ctx, db.SetPasswordParams{ID: m.UserID, PasswordHash: hash}); err != nil {
		return fmt.Errorf("auth: set password: %w", err)
	}
	if err := audit.Record(ctx, q, System(workspaceID), workspaceID, "user.password_reset", "user", m.UserID.String(), map[string]any{"email": email}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("auth: commit: %w", err)
	}
	return nil
}

// EnsureAdmin creates the first admin when the workspace has none. With an
// empty password it generates one; it returns the password it set (to be
// shown once) or "" when an admin existed already. Safe to race: a
// transaction-scoped advisory lock serialises concurrent first starts.
func (s *Service) EnsureAdmin(ctx context.Context, workspaceID uuid.UUID, email, password string) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("auth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if err := q.LockFirstAdmin(ctx); err != nil {
		return "", fmt.Errorf("auth: lock: %w", err)
	}
	n, err := q.CountAdmins(ctx, workspaceID)
	if err != nil {
		return "", fmt.Errorf("auth: count admins: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	if password == "" {
		password = GeneratePassword()
	}
	if _, err := s.createUser(ctx, q, workspaceID, email, password, RoleAdmin); err != nil {
		return "", fmt.Errorf("auth: create first admin: %w", err)
	}
	return password, tx.Commit(ctx)
}

// tokenPrefix marks Gatehouse tokens so secret scanners can recognise them.
const tokenPrefix = "gh_"

// CreateToken issues an API token for the user with that email. The token
// is returned once; only its SHA-256 is stored.
func (s *Service) CreateToken(ctx context.Context, email string, kind TokenKind, name string) (string, error) {
	return s.CreateTokenFor(ctx, email, NewToken{Kind: kind, Name: name}, false)
}

// CreateConnectorToken issues a user token for a connector acting for the
// user with that email (see Principal.Connector).
func (s *Service) CreateConnectorToken(ctx context.Context, email, name string) (string, error) {
	return s.CreateTokenFor(ctx, email, NewToken{Kind: TokenUser, Name: name}, true)
}

// CreateTokenFor issues a token, with its expiry and scope, for the user
// with that email, as the system of their workspace (the command line);
// connector marks a connector's user token. Audited as token.created.
func (s *Service) CreateTokenFor(ctx context.Context, email string, nt NewToken, connector bool) (string, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return "", err
	}
	u, err := s.q.GetUserByEmail(ctx, email)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", apperr.Errorf(apperr.ENOTFOUND, "No user has the email %s.", email)
	}
	if err != nil {
		return "", fmt.Errorf("auth: get user: %w", err)
	}
	owner, err := s.PrincipalForUser(ctx, u.ID)
	if err != nil {
		return "", err
	}
	token, _, err := s.issueToken(ctx, System(owner.WorkspaceID), owner, nt, connector, time.Now())
	return token, err
}

// ErrBadToken is the one answer to a wrong, unknown or revoked token.
var ErrBadToken = apperr.Errorf(apperr.EUNAUTH, "The bearer token is missing, unknown, revoked or expired.")

// AuthenticateToken resolves a bearer token to its principal.
func (s *Service) AuthenticateToken(ctx context.Context, token string) (Principal, error) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 100 {
		return Principal{}, ErrBadToken
	}
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	if e, ok := s.tokens.get(sum, now); ok {
		return e.p, nil
	}
	row, err := s.q.LookupAPIToken(ctx, sum[:])
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrBadToken
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: look up token: %w", err)
	}
	p := Principal{
		UserID: row.UserID, Email: row.Email, WorkspaceID: row.WorkspaceID, Role: Role(row.Role),
		TokenID: row.ID, TokenKind: TokenKind(row.Kind), TokenName: row.Name, Connector: row.Connector, ApproverRoles: row.ApproverRoles,
		Audience: row.Audience.String, Bound: TokenBinding{Conversation: row.ConversationID.UUID, Notebook: row.NotebookID.UUID},
	}
	if row.ScopeTools != nil || row.ScopeReadOnly {
		p.TokenScope = &policy.TokenScope{Tools: row.ScopeTools, ReadOnly: row.ScopeReadOnly}
	}
	// Best effort, and at most once a minute per token (the query says so
	// too): a failed touch must not fail the request.
	_ = s.q.TouchAPIToken(ctx, row.ID)
	// An OAuth access token is believed no longer than it lives.
	expires := now.Add(time.Duration(s.tokens.ttl.Load()))
	if row.SecretExpiresAt != nil && row.SecretExpiresAt.Before(expires) {
		expires = *row.SecretExpiresAt
	}
	s.tokens.m.Store(sum, cachedToken{p: p, expires: expires})
	return p, nil
}

// TokenRevokedEvent prefixes the event (on the events channel every
// instance listens to) that says a token was revoked: "tokens:revoked:<id>".
const TokenRevokedEvent = "tokens:revoked:"

// SetTokenCacheTTL sets how long an authenticated token is believed without
// a lookup (TokenCacheTTL by default); tests lengthen it to show that a
// revocation reaches other instances by notification, not by expiry.
func (s *Service) SetTokenCacheTTL(d time.Duration) { s.tokens.ttl.Store(int64(d)) }

// ForgetToken drops a revoked token from this instance's cache; an instance
// calls it when another says it revoked the token.
func (s *Service) ForgetToken(id uuid.UUID) {
	s.tokens.forget(func(p Principal) bool { return p.TokenID == id })
}

// SweepTokenCache drops expired cached tokens; the server's sweeper calls it.
func (s *Service) SweepTokenCache(now time.Time) { s.tokens.sweep(now) }

// RevokeToken revokes a token by id, as the system of its workspace (the
// command line).
func (s *Service) RevokeToken(ctx context.Context, id uuid.UUID) error {
	t, err := s.q.GetAPIToken(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.Errorf(apperr.ENOTFOUND, "No live token has that id.")
	}
	if err != nil {
		return fmt.Errorf("auth: get token: %w", err)
	}
	return s.RevokeTokenAs(ctx, System(t.WorkspaceID), id)
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// The sign-in brake slows an attacker without locking the real user out.
// Failed attempts are counted in fixed windows, in PostgreSQL (so the brake
// holds across instances), per (account, address) pair and per address. An
// attempt is refused when its own pair or its address is over the limit:
// failures on an account from elsewhere never refuse a client that has not
// been failing, so the right password from a fresh address still signs in
// while the account is under attack. An IPv6 client counts by its /64, the
// block one subscriber usually holds, so it cannot dodge the brake by
// walking its own addresses.
const (
	signInWindow             = 15 * time.Minute
	signInFailuresPerPair    = 10
	signInFailuresPerAddress = 50
)

// SignIn authenticates a browser sign-in from the client at address,
// refusing it while that client failed too often on this account, or on
// any, in the current window (429, with retry_after). The answer never
// tells whether the account exists.
func (s *Service) SignIn(ctx context.Context, email, password, address string) (Principal, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	now := time.Now()
	start := now.Truncate(signInWindow)
	buckets := signInBuckets(email, BrakeAddress(address))
	// The attempt is counted before the password is checked, so guesses
	// sent in parallel cannot all slip in under the limit; one that turns
	// out right is taken back below.
	over := false
	for _, b := range buckets {
		n, err := s.q.CountRate(ctx, db.CountRateParams{Bucket: b.key, WindowStart: start, ExpiresAt: start.Add(signInWindow)})
		if err != nil {
			return Principal{}, fmt.Errorf("auth: sign-in brake: %w", err)
		}
		over = over || int(n) > b.limit
	}
	if over {
		wait := start.Add(signInWindow).Sub(now)
		e := apperr.Errorf(apperr.ERATELIMIT, "Too many failed sign-ins. Try again in %d minutes.", int(wait.Minutes())+1)
		e.Extra = map[string]any{"retry_after": int(wait.Seconds()) + 1}
		return Principal{}, e
	}
	p, err := s.Authenticate(ctx, email, password)
	if apperr.Code(err) != apperr.EUNAUTH {
		// Signed in (or failed on our side): not a failed guess. Best
		// effort: a count left behind only brings the brake one step nearer.
		for _, b := range buckets {
			_ = s.q.UncountRate(context.WithoutCancel(ctx), db.UncountRateParams{Bucket: b.key, WindowStart: start})
		}
	}
	return p, err
}

type signInBucket struct {
	key   string
	limit int
}

// signInBuckets are the rate buckets of a sign-in attempt: its (account,
// address) pair, hashed so an arbitrary email makes a key of fixed size,
// and its address.
func signInBuckets(email, address string) []signInBucket {
	pair := sha256.Sum256([]byte(email + "\x00" + address))
	return []signInBucket{
		{"signin:pair:" + hex.EncodeToString(pair[:]), signInFailuresPerPair},
		{"signin:address:" + address, signInFailuresPerAddress},
	}
}

// BrakeAddress is the client address a brake counts by (the sign-in
// brake, OAuth registration's): an IPv4 address as it is (also when
// written IPv4-mapped), an IPv6 address by its /64 (the block one
// subscriber usually holds), and "unknown" for anything that is not an IP
// address.
func BrakeAddress(address string) string {
	ip, err := netip.ParseAddr(address)
	if err != nil {
		return "unknown"
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}
