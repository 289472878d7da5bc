// Package mcp is Gatehouse over the Model Context Protocol: the /mcp
// endpoint agents connect to (Streamable HTTP), whose tools/call goes
// through the one propose → apply service, and the clients of the upstream
// MCP servers that sit behind the gate. It uses the official Go SDK.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/cursor"
	"github.com/gatehouse/gatehouse/internal/feedback"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/telemetry"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Options are what the gateway needs from the web layer.
type Options struct {
	// ProposalURL is the path where the owner confirms a pending proposal
	// (its card or cell); ApprovalURL where an approver resolves a packet.
	// The gateway makes both absolute with the connection's origin.
	ProposalURL func(proposals.Proposal) string
	ApprovalURL func(approvalID uuid.UUID) string
	// StoreCall is the response an idempotency key keeps for a recorded
	// call (the proposal, or the refusal that recorded it): the REST API's,
	// so the same key answers alike on both.
	StoreCall func(proposals.Proposal, error) (proposals.StoredResponse, error)
	// Feedback takes submit_feedback (nil: the tool is not offered).
	Feedback *feedback.Service
	// Version is the server's version in the initialize answer.
	Version string
	// SessionTimeout closes an MCP session left idle this long (30 min
	// when zero).
	SessionTimeout time.Duration
	// Telemetry exports a span per call (nil: none).
	Telemetry *telemetry.Telemetry
	// Queries keeps each session's binding in PostgreSQL (mcp_sessions),
	// so that any instance serves it (sessions.go). Nil: sessions live in
	// this process only.
	Queries *db.Queries
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call /mcp besides the server's own loopback origin
	// (GATEHOUSE_MCP_ALLOWED_ORIGINS); a request from any other Origin is
	// refused with 403. A request without Origin is not a browser's and
	// goes on.
	AllowedOrigins []string
}

// Gateway is the /mcp endpoint: an http.Handler that serves Streamable
// HTTP sessions. Each session is bound to one conversation or notebook of
// the token's owner, and every tools/call in it is proposed there.
type Gateway struct {
	props     *proposals.Service
	registry  *tools.Registry
	convs     *conversations.Service
	upstreams *Upstreams
	log       *slog.Logger
	opts      Options
	origins   []string // AllowedOrigins, each as ParseOrigin reads it
	handler   http.Handler
	// statelessHandler serves the stateless revision (2026-07-28:
	// stateless.go), a server per request.
	statelessHandler http.Handler
	bindings         bindings
	cursorKey        *cursor.Key // seals requestStates
	// base answers the SDK's per-request questions (supported protocol
	// versions) for requests of an existing session.
	base *sdk.Server
	// live are the sessions open on this instance, by id, told when the
	// tools they were shown change (resync); takingUp serializes taking up
	// a session opened elsewhere, per id.
	liveMu   sync.Mutex
	live     map[string]*session
	takingUp map[string]*sync.Mutex
	// sdkOnly sends every request to the SDK, tools/call included
	// (SetDirectCalls); direct counts the calls answered directly.
	sdkOnly atomic.Bool
	direct  atomic.Int64
	// idleAfter is the session timeout (Options.SessionTimeout, or what
	// SetSessionTimeout made it), in nanoseconds.
	idleAfter atomic.Int64
}

// NewGateway builds the endpoint. upstreams may be nil (no upstream
// servers are configured).
func NewGateway(props *proposals.Service, registry *tools.Registry, convs *conversations.Service, upstreams *Upstreams, log *slog.Logger, opts Options) *Gateway {
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	g := &Gateway{props: props, registry: registry, convs: convs, upstreams: upstreams, log: log, opts: opts, live: map[string]*session{}, takingUp: map[string]*sync.Mutex{},
		bindings: bindings{m: map[string]uuid.UUID{}}}
	g.idleAfter.Store(int64(opts.SessionTimeout))
	if opts.Queries != nil {
		g.cursorKey = cursor.NewKey(opts.Queries)
	}
	for _, o := range opts.AllowedOrigins {
		if n, err := ParseOrigin(o); err == nil {
			g.origins = append(g.origins, n)
		} else {
			log.Error("mcp: an allowed origin is not an origin; it allows nothing", "origin", o, "err", err)
		}
	}
	g.base = sdk.NewServer(g.implementation(), &sdk.ServerOptions{HasTools: true, HasResources: true})
	streamable := sdk.NewStreamableHTTPHandler(g.serverFor, &sdk.StreamableHTTPOptions{
		Logger: log,
		// No SessionTimeout: the gateway closes idle sessions itself
		// (session.idle), since it answers some requests without the SDK
		// (direct.go), which would count a session used only by them as
		// idle.
		//
		// The SDK refuses a request to a loopback listener whose Host is
		// not loopback, which would refuse every request through a reverse
		// proxy in front of 127.0.0.1:8080. DNS rebinding is refused by the
		// Origin check instead (AllowsOrigin), on every request.
		DisableLocalhostProtection: true,
	})
	// The web layer has authenticated the request (401 otherwise) and put
	// the principal in its context; the SDK's bearer middleware passes it
	// on to each request, and ties a session to the token that opened it,
	// so no other token can use the session's id.
	requireBearer := sdkauth.RequireBearerToken(verifyConnected, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	g.handler = requireBearer(streamable)
	g.statelessHandler = requireBearer(sdk.NewStreamableHTTPHandler(g.serverFor, &sdk.StreamableHTTPOptions{
		Logger: log, Stateless: true, DisableLocalhostProtection: true,
	}))
	registry.OnChange(g.resync)
	return g
}

func (g *Gateway) implementation() *sdk.Implementation {
	return &sdk.Implementation{Name: "gatehouse", Title: "Gatehouse", Version: g.opts.Version}
}

// ServeHTTP serves /mcp. The request's context must carry a Connection
// (WithConnection): the web layer authenticates the token first. A request
// from a foreign Origin is refused here too, whatever came before.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	self := ""
	if c := connectionOf(r.Context()); c != nil {
		self = c.Origin
	}
	if g.RefuseForeignOrigin(w, r, self) {
		return
	}
	if stateless(r) && g.cursorKey != nil {
		g.statelessHandler.ServeHTTP(w, r)
		return
	}
	if id := r.Header.Get(sessionIDHeader); id != "" {
		if g.takeUp(w, r, id) {
			return
		}
		if s := g.heldFor(r, id); s != nil && r.Method == http.MethodPost {
			s.idle.startPOST()
			defer s.idle.endPOST()
			if !g.sdkOnly.Load() && g.serveDirect(w, r, s) {
				g.direct.Add(1)
				return
			}
		}
	}
	g.handler.ServeHTTP(w, r)
}

// heldFor is the session id as this instance holds it, when r's token is
// the one that opened it (nil otherwise: the SDK answers 404 or 403).
func (g *Gateway) heldFor(r *http.Request, id string) *session {
	c := connectionOf(r.Context())
	g.liveMu.Lock()
	s := g.live[id]
	g.liveMu.Unlock()
	if s == nil || c == nil || c.Principal.TokenID == uuid.Nil || s.tokenOf() != c.Principal.TokenID {
		return nil
	}
	return s
}

// SetDirectCalls turns direct calls (direct.go) on, as they are by
// default, or off: every request then goes to the SDK. Tests compare the
// two answers.
func (g *Gateway) SetDirectCalls(on bool) { g.sdkOnly.Store(!on) }

// DirectCalls counts the tools/call requests this instance answered
// without the SDK.
func (g *Gateway) DirectCalls() int64 { return g.direct.Load() }

// SetSessionTimeout sets how long a session may stay idle before it is
// closed, for the sessions opened or taken up from now on; tests shorten
// it.
func (g *Gateway) SetSessionTimeout(d time.Duration) { g.idleAfter.Store(int64(d)) }

// sessionTimeout is how long a session may stay idle.
func (g *Gateway) sessionTimeout() time.Duration { return time.Duration(g.idleAfter.Load()) }

// Connection is what the web layer learned of a request before the SDK
// sees it: who sent it (authenticated by its bearer token), the scope it
// asks its session to be bound to (nil: a new conversation, created on
// initialize), and the origin to make links absolute with.
type Connection struct {
	Principal auth.Principal
	Scope     *proposals.Scope
	Origin    string

	server *sdk.Server // built once per request (the SDK asks twice)
	// stored is the session being taken up on this instance (its row):
	// the request is takeUp's replay of its initialize.
	stored *db.McpSession
	// stateless: the request speaks the stateless revision (2026-07-28):
	// its server lives for it alone.
	stateless bool
}

type connectionKey struct{}

// WithConnection puts c in ctx for ServeHTTP.
func WithConnection(ctx context.Context, c Connection) context.Context {
	return context.WithValue(ctx, connectionKey{}, &c)
}

func connectionOf(ctx context.Context) *Connection {
	c, _ := ctx.Value(connectionKey{}).(*Connection)
	return c
}

// verifyConnected is the SDK's token verifier: the token was checked by
// the web layer, which put its principal in the context. The session is
// tied to the token's id.
func verifyConnected(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	c := connectionOf(ctx)
	if c == nil || c.Principal.TokenID == uuid.Nil {
		return nil, sdkauth.ErrInvalidToken
	}
	return &sdkauth.TokenInfo{UserID: c.Principal.TokenID.String(), Extra: map[string]any{principalExtra: c.Principal}}, nil
}

const principalExtra = "gatehouse_principal"

// principalOf is the principal of the request being handled: the token
// authenticated for this very HTTP request, so a revoked token or a changed
// role counts at once.
func principalOf(extra *sdk.RequestExtra) (auth.Principal, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return auth.Principal{}, false
	}
	p, ok := extra.TokenInfo.Extra[principalExtra].(auth.Principal)
	return p, ok
}

// serverFor is the SDK's getServer: a new session gets a server of its
// own, bound to its scope; a request of an existing session is answered by
// that session's server, and this one only answers which protocol
// versions are supported.
func (g *Gateway) serverFor(r *http.Request) *sdk.Server {
	c := connectionOf(r.Context())
	if c == nil {
		return nil
	}
	if r.Header.Get(sessionIDHeader) != "" {
		return g.base
	}
	if c.server == nil {
		c.stateless = stateless(r) && g.cursorKey != nil
		c.server = g.newSessionServer(c)
	}
	return c.server
}

// session is one MCP session's state on this instance: the scope its
// calls are proposed in, and the registry's tools it was shown. Its row in
// mcp_sessions is what another instance needs to take it up.
type session struct {
	g      *Gateway
	srv    *sdk.Server
	id     string
	origin string
	// stored: the session was opened on another instance and taken up
	// here (its row exists).
	stored bool
	// stateless: a server for one request of the stateless revision; its
	// calls go to the token's conversation for the client when it names
	// no scope (stateless.go).
	stateless bool
	// tokenScope is the session's token's scope: the tools it is shown.
	tokenScope *policy.TokenScope
	mu         sync.Mutex
	chosen     *proposals.Scope // asked for on connect, checked then
	// planned is the conversation the first tool call creates when none
	// was chosen; its id is drawn as the session opens, so that whichever
	// instance the call reaches creates the same one.
	planned uuid.UUID
	scope   *proposals.Scope // bound
	client  string
	ss      *sdk.ServerSession
	touched time.Time // when this instance last wrote the row's seen_at
	// token is the token that opened the session, protocol the revision
	// it negotiated; closed is set once the session is ending, and ctx
	// ends with it. calls cancel the direct calls in flight, by request
	// id; idle closes the session left idle (direct.go).
	token    uuid.UUID
	protocol string
	closed   bool
	ctx      context.Context
	end      context.CancelFunc
	calls    map[jsonrpc.ID]context.CancelFunc
	idle     idleTimer
	// shown is each registry tool the session lists, by name: the
	// definition it was shown (JSON); sheets each cheatsheet it lists, by
	// URI: the ETag of the content it was shown.
	shown  map[string]string
	sheets map[string]string
}

// newSessionServer is the server of one session: every tool of the
// registry that the session's token may call, check_proposal, and the
// cheatsheets as resources.
func (g *Gateway) newSessionServer(c *Connection) *sdk.Server {
	sess := &session{g: g, id: newSessionID(), origin: c.Origin, chosen: c.Scope, planned: uuid.New(), stateless: c.stateless,
		tokenScope: c.Principal.TokenScope, shown: map[string]string{}, sheets: map[string]string{}, calls: map[jsonrpc.ID]context.CancelFunc{}}
	sess.ctx, sess.end = context.WithCancel(context.Background())
	if c.stored != nil {
		sess.restore(c.stored)
	}
	srv := sdk.NewServer(g.implementation(), &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       g.log,
		HasTools:     true,
		HasResources: true,
		GetSessionID: func() string { return sess.id },
		// Cheatsheets: their names complete, and a client may subscribe
		// to one to be told when it changes.
		CompletionHandler:  g.complete,
		SubscribeHandler:   g.subscribe,
		UnsubscribeHandler: unsubscribe,
	})
	sess.srv = srv
	srv.AddReceivingMiddleware(sess.bindOnInitialize, sess.trackListening, sess.cancelDirect)
	sess.sync()
	srv.AddTool(checkProposalTool(), sess.checkProposal)
	if g.offersCallerTools(c.Principal.TokenScope) {
		srv.AddTool(requestPermissionTool(), sess.requestPermission)
		srv.AddTool(reportOutcomeTool(), sess.reportOutcome)
	}
	if g.opts.Feedback != nil {
		srv.AddTool(submitFeedbackTool(), sess.submitFeedback)
	}
	srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: cheatsheetTemplate, Name: "cheatsheet", Title: "A tool's cheatsheet",
		Description: "How to use a tool well (complete its name); read it before any write.", MIMEType: "text/markdown"}, g.readCheatsheet)
	return srv
}

const instructions = "Gatehouse stands between you and these tools. Every call is proposed: reads run at once, " +
	"changes run where the owner allows it, and others wait for the owner's confirmation or an approver. " +
	"Give every call a rationale (10 to 500 characters) saying why you make it. A call that waits returns at once " +
	"with a proposal id: call check_proposal with it later for the outcome. A refused call says why; adapt instead of retrying it as is. " +
	"If you are stuck, call submit_feedback to tell the workspace's admins what you tried and what happened."

// bindOnInitialize says, as the session initializes, where its calls are
// proposed: the scope the client asked for, or a new conversation named
// after the client ("MCP: claude-code") that its first tool call creates,
// so that a client that only lists tools leaves nothing behind.
func (s *session) bindOnInitialize(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "server/discover" {
			// The stateless revision's initialize: the same instructions.
			if r, ok := req.(*sdk.ServerRequest[*sdk.DiscoverParams]); ok {
				if ci := r.ClientInfo(); ci != nil {
					s.mu.Lock()
					s.client = ci.Name
					s.mu.Unlock()
				}
			}
			res, err := next(ctx, method, req)
			if dr, ok := res.(*sdk.DiscoverResult); ok && err == nil {
				dr.Instructions = instructions + " " + s.scopeSentence()
			}
			return res, err
		}
		if method != "initialize" {
			return next(ctx, method, req)
		}
		if params, ok := req.GetParams().(*sdk.InitializeParams); ok && params != nil && params.ClientInfo != nil {
			s.mu.Lock()
			s.client = params.ClientInfo.Name
			s.mu.Unlock()
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		ir, _ := res.(*sdk.InitializeResult)
		if ir != nil {
			ir.Instructions = instructions + " " + s.scopeSentence()
		}
		ss, _ := req.GetSession().(*sdk.ServerSession)
		if ss == nil {
			return res, nil
		}
		if err := s.store(ctx, req, ir); err != nil {
			go ss.Close()
			return nil, err
		}
		if p, ok := principalOf(req.GetExtra()); ok && ir != nil {
			s.mu.Lock()
			s.token, s.protocol = p.TokenID, ir.ProtocolVersion
			s.mu.Unlock()
		}
		s.g.track(s, ss)
		return res, nil
	}
}

// trackListening keeps a stateless request's session among the open
// sessions while it listens for notifications (subscriptions/listen), so
// that it is told when its tools change, as a session's GET stream is.
func (s *session) trackListening(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok && s.stateless && method == "subscriptions/listen" {
			s.g.track(s, ss)
		}
		return next(ctx, method, req)
	}
}

// track keeps s among the open sessions until ss ends, and closes it once
// it has been idle for the session timeout.
func (g *Gateway) track(s *session, ss *sdk.ServerSession) {
	s.mu.Lock()
	s.ss = ss
	s.mu.Unlock()
	g.liveMu.Lock()
	g.live[s.id] = s
	g.liveMu.Unlock()
	if !s.stateless {
		s.idle.start(g.sessionTimeout(), s.close)
	}
	go func() {
		ss.Wait()
		s.idle.stop()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.end()
		g.liveMu.Lock()
		if g.live[s.id] == s {
			delete(g.live, s.id)
		}
		g.liveMu.Unlock()
	}()
}

// resync shows every open session the registry's tools as they are now
// (the registry changed: an upstream listed other tools, an admin accepted
// or held one, here or on another instance). The SDK tells each session
// whose list changed (notifications/tools/list_changed).
func (g *Gateway) resync() {
	g.liveMu.Lock()
	open := make([]*session, 0, len(g.live))
	for _, s := range g.live {
		open = append(open, s)
	}
	g.liveMu.Unlock()
	for _, s := range open {
		s.sync()
	}
}

// LiveSessions counts the open sessions this instance would tell of a
// change of its tools.
func (g *Gateway) LiveSessions() int {
	g.liveMu.Lock()
	defer g.liveMu.Unlock()
	return len(g.live)
}

// sync makes the session's tools the registry's that its token may call,
// adding (or replacing) those whose definition is new to it and removing
// those that are gone, and its resources the registry's cheatsheets; it
// tells the subscribers of a cheatsheet that changed.
func (s *session) sync() {
	list := s.g.registry.List()
	s.mu.Lock()
	s.syncTools(list)
	updated := s.syncCheatsheets(list)
	s.mu.Unlock()
	for _, uri := range updated {
		if err := s.srv.ResourceUpdated(context.Background(), &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			s.g.log.Warn("mcp: tell a cheatsheet's subscribers", "uri", uri, "err", err)
		}
	}
}

// syncTools does sync's part for tools. s.mu is held.
func (s *session) syncTools(list []*tools.Tool) {
	want := map[string]bool{}
	for _, t := range list {
		// A scoped token is shown only the tools it may call (its calls
		// are decided with the token layer all the same).
		if !s.tokenScope.Allows(t.Name, t.Effect) || t.Caller {
			continue // a caller tool is run by the agent: request_permission
		}
		want[t.Name] = true
		def := s.g.mcpTool(t)
		b, err := json.Marshal(def)
		if err != nil {
			s.g.log.Error("mcp: encode a tool's definition", "tool", t.Name, "err", err)
			continue
		}
		if s.shown[t.Name] == string(b) {
			continue
		}
		s.srv.AddTool(def, s.callTool(t.Name))
		s.shown[t.Name] = string(b)
	}
	var gone []string
	for name := range s.shown {
		if !want[name] {
			gone = append(gone, name)
			delete(s.shown, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
}

// scopeSentence says where the session's calls are proposed.
func (s *session) scopeSentence() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	scope := s.scope
	if scope == nil {
		scope = s.chosen
	}
	if scope == nil && s.stateless {
		return fmt.Sprintf("This client's calls are proposed in one conversation of its token, %q, which its first tool call creates (%s lists it); "+
			"its owner sets its permission mode there. Name another with the Gatehouse-Conversation or Gatehouse-Notebook header.", conversationTitle(s.client), s.origin+"/conversations")
	}
	if scope == nil {
		return fmt.Sprintf("This session's calls are proposed in a new conversation, %q, which its first tool call creates (%s lists it); "+
			"its owner sets its permission mode there.", conversationTitle(s.client), s.origin+"/conversations")
	}
	kind := "conversation"
	setting := "its permission mode"
	path := "/conversations/" + scope.ID.String()
	if scope.Kind == proposals.ScopeNotebook {
		kind, setting, path = "notebook", "its trust level", "/notebooks/"+scope.ID.String()
	}
	return fmt.Sprintf("This session's calls are proposed in %s %s (%s); its owner sets %s there.", kind, scope.ID, s.origin+path, setting)
}

// bind returns the session's scope, binding it on first use (its first
// tool call): the one chosen on connect (checked to be the owner's then),
// or the planned conversation, created now (by this instance or another
// one that served the session's first call: created once).
func (s *session) bind(ctx context.Context, p auth.Principal) (proposals.Scope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scope != nil {
		return *s.scope, nil
	}
	if s.chosen != nil {
		s.scope = s.chosen
		return *s.scope, nil
	}
	if s.stateless {
		planned, err := s.g.statelessConversation(ctx, p, s.client)
		if err != nil {
			return proposals.Scope{}, err
		}
		s.planned = planned
	}
	conv, err := s.g.convs.CreateWithID(ctx, p, s.planned, conversationTitle(s.client))
	if err != nil {
		return proposals.Scope{}, fmt.Errorf("mcp: create the session's conversation: %w", err)
	}
	scope := proposals.InConversation(conv.ID)
	s.scope = &scope
	return scope, nil
}

// conversationTitle names a session's conversation after its client:
// printable characters only, at most 100 of them.
func conversationTitle(client string) string {
	name := strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, client)
	name = strings.TrimSpace(name)
	if name == "" {
		name = "client"
	}
	if utf8.RuneCountInString(name) > 100 {
		name = string([]rune(name)[:100])
	}
	return "MCP: " + name
}

// absolute makes a path absolute with the session's origin.
func (s *session) absolute(path string) string {
	if path == "" || strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return path
	}
	return s.origin + path
}
