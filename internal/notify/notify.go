// Package notify brings a decision to the person who makes it: when a
// confirm card waits for its owner or an approval packet for an approver,
// it tells them by email and by their signed webhook, with one-time links
// to a page that decides it (issue 27, items 1 and 2).
//
// Nothing here runs in a call's transaction. A roll-up feed over the audit
// log (Feed) finds the calls that started waiting and queues their
// notifications in one statement; a sender on every instance (Send)
// claims what is due, lets go of the database while it mails and posts,
// and records each outcome, trying a failed delivery again with backoff.
package notify

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/rollup"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Service queues and sends notifications, and keeps their links.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	log    *slog.Logger
	mailer tools.Mailer // nil: mail is held in the workspace outbox
	client *http.Client // webhooks
	// base is the server's public URL, for the links (no slash at the
	// end).
	base string
	// now is the clock (tests move it).
	now func() time.Time
}

// Options configure a Service.
type Options struct {
	// Mailer delivers mail; nil holds it in the workspace outbox
	// (/admin/outbox), as email.send does without SMTP.
	Mailer tools.Mailer
	// PublicURL is where people reach Gatehouse (GATEHOUSE_PUBLIC_URL): the
	// links in messages start with it.
	PublicURL string
	// HTTPClient posts webhooks (nil: one with a 10 s timeout that does not
	// follow redirects).
	HTTPClient *http.Client
}

// New makes the service.
func New(pool *pgxpool.Pool, log *slog.Logger, o Options) *Service {
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: webhookTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	base := o.PublicURL
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return &Service{pool: pool, q: db.New(pool), log: log, mailer: o.Mailer, client: client, base: base, now: time.Now}
}

// SetClock replaces the clock (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// FeedName is the notifications' roll-up feed (rollup_feeds).
const FeedName = "notifications"

// foldSpan is how many audit ids one turn folds at most.
const foldSpan = 20000

// RollUp takes one turn of the feed that queues notifications (run on
// every instance: one at a time folds it).
func (s *Service) RollUp(ctx context.Context) (rollup.Progress, error) {
	return rollup.Advance(ctx, s.pool, rollup.Feed{Name: FeedName, Tables: []string{"audit_events"}, GenericPlans: true,
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.AuditHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
			upto = min(upto, after+foldSpan)
			_, err := q.FoldNotifications(ctx, db.FoldNotificationsParams{After: after, Upto: upto})
			return upto, err
		},
	})
}
