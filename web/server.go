// Package web is the HTTP edge: echo routes, the HTML and JSON handlers,
// middleware and static assets. Handlers translate HTTP to service calls and
// back; they hold no SQL and no policy.
package web

import (
	"context"
	"crypto/ed25519"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/chat"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/feedback"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/notify"
	"github.com/gatehouse/gatehouse/internal/policyfile"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/rollup"
	"github.com/gatehouse/gatehouse/internal/settings"
	"github.com/gatehouse/gatehouse/internal/telemetry"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/internal/trust"
)

//go:embed static
var staticFS embed.FS

// Config holds what the web layer needs from the process configuration.
type Config struct {
	MCPAllowedOrigins []string // browser origins that may call /mcp besides its own loopback one (GATEHOUSE_MCP_ALLOWED_ORIGINS)
	// CookieSecure marks the session and CSRF cookies Secure.
	CookieSecure bool
	// TrustedProxies are the proxies whose X-Forwarded-For is believed for
	// the client's address (the sign-in brake, logs). None: the header is
	// ignored and the peer's address is the client's.
	TrustedProxies []netip.Prefix
	// SessionLifetime bounds a browser session; SessionIdle ends an unused one.
	SessionLifetime time.Duration
	SessionIdle     time.Duration
	// ReceiptKey signs receipt checkpoints (nil: none are signed). It is
	// read from a file outside the database (GATEHOUSE_RECEIPT_KEY_FILE).
	ReceiptKey ed25519.PrivateKey
	// SequenceEvery is how often the receipt sequencer runs (200 ms).
	SequenceEvery time.Duration
	// Chat is the model endpoint conversations chat with (no model: none).
	Chat chat.Config
	// Mailer delivers notifications' mail (nil: held in the workspace
	// outbox); PublicURL starts the links in them (GATEHOUSE_PUBLIC_URL).
	Mailer    tools.Mailer
	PublicURL string
	// IssuerURL is the OAuth issuer and /mcp's resource origin
	// (GATEHOUSE_PUBLIC_URL when set; "": the origin each request reached).
	IssuerURL string
	// NotifyEvery is how often due notifications are sent (1 s).
	NotifyEvery time.Duration
	// Telemetry exports a span per tool call and the audit log
	// (OpenTelemetry, JSON lines); nil exports nothing.
	Telemetry *telemetry.Telemetry
}

// Server is the HTTP application.
type Server struct {
	cfg      Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	q        *db.Queries
	auth     *auth.Service
	convs    *conversations.Service
	nbs      *notebooks.Service
	settings *settings.Service
	feedback *feedback.Service
	intent   *intent.Service
	props    *proposals.Service
	trust    *trust.Service
	receipts *receipts.Service
	registry *tools.Registry
	gateway  *mcp.Gateway
	// notify tells people that a call waits for them (internal/notify);
	// notified closes when its sender stops.
	notify   *notify.Service
	notified chan struct{}
	// upstreams may be nil: no upstream is configured.
	upstreams *mcp.Upstreams
	// policy is the policy file in force (nil: none is shown).
	policy   *policyfile.Loader
	sessions *scs.SessionManager
	stop     context.CancelFunc
	stopped  chan struct{}
	// chained closes when the receipt sequencer has stopped.
	chained chan struct{}
	// verified closes when the receipt chain verifier has stopped.
	verified chan struct{}
	// rolledUp closes when the roll-up of /trust's and /admin/intent's
	// aggregates has stopped.
	rolledUp chan struct{}
	metrics  *prometheus.Registry
	api      *apiSpec
	echo     *echo.Echo
	events   *hub
	// bus announces changes to every instance's live pages after commit.
	bus *events.Bus
	// flushed closes when the bus has sent its last announcements.
	flushed chan struct{}
	// chat runs model turns (see web/chat.go).
	chat *chat.Service
	// bg ends when the server closes: background work and live streams stop.
	bg context.Context
}

// Services are the domain services the handlers call.
type Services struct {
	Auth          *auth.Service
	Conversations *conversations.Service
	Notebooks     *notebooks.Service
	Proposals     *proposals.Service
	Settings      *settings.Service
	Feedback      *feedback.Service
	Intent        *intent.Service
	Trust         *trust.Service
	Receipts      *receipts.Service
	// Registry is the tool registry the proposals service decides with.
	Registry *tools.Registry
	// Upstreams are the MCP servers behind the gate (nil: none).
	Upstreams *mcp.Upstreams
	// Policy keeps the policy file in force (nil: /admin shows nothing of
	// it).
	Policy *policyfile.Loader
}

// NewServices builds every service on one pool, with the tool registry
// (checked at start: see tools.Builtin).
func NewServices(pool *pgxpool.Pool, log *slog.Logger, params auth.PasswordParams, registry *tools.Registry) Services {
	return Services{
		Auth:          auth.NewService(pool, params),
		Conversations: conversations.NewService(pool),
		Notebooks:     notebooks.NewService(pool),
		Proposals:     proposals.NewService(pool, registry, log),
		Settings:      settings.NewService(pool),
		Intent:        intent.NewService(pool),
		Feedback:      feedback.NewService(pool, func(name string) bool { _, ok := registry.Get(name); return ok }),
		Trust:         trust.NewService(pool, registry.Classes()),
		Receipts:      receipts.NewService(pool),
		Registry:      registry,
	}
}

// New builds the server and its routes.
func New(cfg Config, log *slog.Logger, pool *pgxpool.Pool, svc Services) (*Server, error) {
	if cfg.SessionLifetime == 0 {
		cfg.SessionLifetime = 7 * 24 * time.Hour
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = 24 * time.Hour
	}
	if cfg.SequenceEvery == 0 {
		cfg.SequenceEvery = 200 * time.Millisecond
	}
	if cfg.NotifyEvery == 0 {
		cfg.NotifyEvery = time.Second
	}
	spec, err := loadAPISpec()
	if err != nil {
		return nil, err
	}
	// pgxstore's own cleanup goroutine races on stop; sweepSessions does it.
	store := pgxstore.NewWithCleanupInterval(pool, 0)
	sm := scs.New()
	sm.Store = store
	sm.Lifetime = cfg.SessionLifetime
	sm.IdleTimeout = cfg.SessionIdle
	sm.Cookie.Name = cookieName("gatehouse_session", cfg.CookieSecure)
	sm.Cookie.Path = "/"
	sm.Cookie.HttpOnly = true
	sm.Cookie.Secure = cfg.CookieSecure
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Persist = true

	s := &Server{
		cfg: cfg, log: log, pool: pool, q: db.New(pool), auth: svc.Auth, convs: svc.Conversations, nbs: svc.Notebooks, settings: svc.Settings, feedback: svc.Feedback, intent: svc.Intent, props: svc.Proposals, trust: svc.Trust,
		registry: svc.Registry, upstreams: svc.Upstreams, policy: svc.Policy,
		sessions: sm, metrics: prometheus.NewRegistry(), api: spec, stopped: make(chan struct{}), chained: make(chan struct{}), verified: make(chan struct{}),
		receipts: svc.Receipts,
	}
	if s.receipts != nil && cfg.ReceiptKey != nil {
		s.receipts = s.receipts.WithSigner(receipts.NewSigner(cfg.ReceiptKey))
	}
	if cfg.Telemetry != nil {
		if err := s.metrics.Register(cfg.Telemetry.Dropped()); err != nil {
			return nil, err
		}
	}
	s.notify = notify.New(pool, log, notify.Options{Mailer: cfg.Mailer, PublicURL: cfg.PublicURL})
	s.notified = make(chan struct{})
	s.events = newHub()
	s.bus = events.NewBus(pool, log)
	s.flushed = make(chan struct{})
	if s.props != nil {
		s.props.SetAnnouncer(s.bus)
	}
	if s.props != nil && s.registry != nil {
		s.gateway = s.newGateway(svc.Upstreams)
	}
	if s.props != nil {
		s.chat = chat.NewService(cfg.Chat, pool, s.props, s.bus, log)
	}
	s.echo = s.routes()
	s.bg, s.stop = context.WithCancel(context.Background())
	if s.chat != nil {
		go s.chat.Run(s.bg)
	}
	go s.sweep(s.bg, 10*time.Minute, 15*time.Second)
	go s.sequence(s.bg, cfg.SequenceEvery)
	go s.verifyChains(s.bg, time.Second)
	go s.sendNotifications(s.bg, cfg.NotifyEvery)
	s.rolledUp = make(chan struct{})
	go func() { defer close(s.rolledUp); rollup.Run(s.bg, s.log, 250*time.Millisecond, s.rollUps()...) }()
	go s.listen(s.bg)
	go func() { defer close(s.flushed); s.bus.Run(s.bg) }()
	return s, nil
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Close stops the server's background work (the sweep, the sequencer).
func (s *Server) Close() {
	s.stop()
	if s.chat != nil {
		s.chat.Close() // its turns are handed over: another instance resumes them
	}
	<-s.stopped
	<-s.chained
	<-s.verified
	<-s.rolledUp
	<-s.flushed
	<-s.notified
}

// sequence chains receipts every so often, so a receipt is chained well
// within a second of its outcome; on every instance, since one sequencer
// at a time holds the receipts feed (receipts.Sequence). A failing
// database slows it down to a try every few seconds.
func (s *Server) sequence(ctx context.Context, every time.Duration) {
	defer close(s.chained)
	wait := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		n, err := receipts.Sequence(ctx, s.pool, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("chaining receipts", "err", err)
			wait = min(2*wait, 5*time.Second)
		case n > 0:
			s.log.Debug("receipts chained", "count", n)
			wait = every
		default:
			wait = every
		}
	}
}

// rollUps are the roll-ups this server's services keep (internal/rollup):
// run on every instance, one at a time per feed.
func (s *Server) rollUps() []rollup.Step {
	var steps []rollup.Step
	if s.trust != nil {
		steps = append(steps, s.trust.RollUp)
	}
	if s.intent != nil {
		steps = append(steps, s.intent.RollUp)
	}
	if s.convs != nil {
		steps = append(steps, s.convs.RollUps()...)
	}
	if s.registry != nil {
		s.cfg.Telemetry.RedactPIIWith(s.registry.PIIFields) // personal data in exported audit rows
	}
	steps = append(steps, s.notify.RollUp, s.cfg.Telemetry.AuditRollUp(s.pool))
	return steps
}

// verifyChains runs the receipt chain verifications that requests start
// (receipts.RunVerifications), on every instance: a run queued here starts
// at once, one queued elsewhere or left by an instance that died within
// the interval. A run hands itself back when the server closes.
func (s *Server) verifyChains(ctx context.Context, every time.Duration) {
	defer close(s.verified)
	if s.receipts == nil {
		return
	}
	wait := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-s.receipts.VerificationsQueued():
		}
		n, err := s.receipts.RunVerifications(ctx, s.log)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("verifying receipt chains", "err", err)
			wait = min(2*wait, 30*time.Second)
		case n > 0:
			s.log.Info("receipt chains verified", "count", n)
			wait = every
		default:
			wait = every
		}
	}
}

// sweep does the periodic clean-up: expired sessions, idempotency keys and
// rate counters now and then, and expired approval packets often (an
// agent waiting on one learns it expired within seconds).
func (s *Server) sweep(ctx context.Context, every, approvalsEvery time.Duration) {
	defer close(s.stopped)
	slow := time.NewTicker(every)
	defer slow.Stop()
	fast := time.NewTicker(approvalsEvery)
	defer fast.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-fast.C:
			if s.props == nil {
				continue
			}
			if ids, err := s.props.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("expiring approvals", "err", err)
			} else if len(ids) > 0 {
				s.log.Info("approvals expired", "count", len(ids))
			}
			if ids, err := s.props.EscalateApprovals(ctx, time.Now()); err != nil && ctx.Err() == nil {
				s.log.Warn("escalating approvals", "err", err)
			} else if len(ids) > 0 {
				s.log.Info("approvals escalated", "count", len(ids))
			}
			if ids, err := s.props.MarkUnreported(ctx, time.Now()); err != nil && ctx.Err() == nil {
				s.log.Warn("marking unreported calls", "err", err)
			} else if len(ids) > 0 {
				s.log.Info("caller-executed calls marked unreported", "count", len(ids))
			}
		case <-slow.C:
			if s.auth != nil {
				s.auth.SweepTokenCache(time.Now())
			}
			if s.props != nil {
				if n, err := s.props.Reconcile(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("reconciling approvals", "err", err)
				} else if n > 0 {
					s.log.Warn("reconciled approval packets and calls that disagreed", "count", n)
				}
			}
			for what, del := range map[string]func(context.Context) (int64, error){
				"sessions": s.q.DeleteExpiredSessions, "idempotency keys": s.q.DeleteExpiredIdempotencyKeys,
				"rate counters":      s.q.DeleteExpiredRateCounters,
				"mcp request states": s.q.DeleteExpiredMCPRequestStates,
				"action links":       s.q.DeleteExpiredActionLinks,
				"rationale alerts":   s.q.DeleteOldRationaleAlerts,
				"mcp sessions": func(ctx context.Context) (int64, error) {
					return s.q.DeleteIdleMCPSessions(ctx, time.Now().Add(-24*time.Hour))
				},
			} {
				if n, err := del(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("sweeping", "what", what, "err", err)
				} else if n > 0 {
					s.log.Debug("swept", "what", what, "count", n)
				}
			}
		}
	}
}

func staticFiles() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	return sub
}

// ready reports whether the database answers within a short deadline.
func (s *Server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.pool.Ping(ctx)
}

// Routes lists every route the server answers (method and path), for
// tests that must cover them all.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }
