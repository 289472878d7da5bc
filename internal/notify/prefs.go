package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Preferences are how a person is told that a decision waits for them.
type Preferences struct {
	Email bool
	// WebhookURL receives signed deliveries ("": none); WebhookSecret
	// signs them (whsec_…), shown to its owner on their settings page.
	WebhookURL, WebhookSecret string
	// QuietStart and QuietEnd are "HH:MM" in TimeZone ("": no quiet
	// hours); nothing is sent inside them.
	QuietStart, QuietEnd, TimeZone string
	// DigestMinutes: 0 one message per call, N one every N minutes.
	DigestMinutes int
}

// Defaults are a person's preferences until they set theirs: email, at
// once.
var Defaults = Preferences{Email: true, TimeZone: "UTC"}

// Get returns p's preferences.
func (s *Service) Get(ctx context.Context, p auth.Principal) (Preferences, error) {
	row, err := s.q.GetNotificationPreferences(ctx, db.GetNotificationPreferencesParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Defaults, nil
	}
	if err != nil {
		return Preferences{}, fmt.Errorf("notify: read preferences: %w", err)
	}
	out := Preferences{Email: row.Email, WebhookURL: row.WebhookUrl.String, WebhookSecret: row.WebhookSecret.String,
		TimeZone: row.TimeZone, DigestMinutes: int(row.DigestMinutes)}
	if row.QuietStart.Valid {
		out.QuietStart, out.QuietEnd = clock(row.QuietStart.Int16), clock(row.QuietEnd.Int16)
	}
	return out, nil
}

func clock(m int16) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// parseClock reads "HH:MM" as minutes of the day.
func parseClock(s string) (int16, bool) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 || len(m) != 2 {
		return 0, false
	}
	return int16(hh*60 + mm), true
}

// Set stores p's preferences, checked field by field (422 naming each
// field at fault, nothing stored): a webhook must be https (or http on a
// loopback host) on the workspace's webhook allowlist; a new webhook gets
// a new secret, kept while the URL stays. Audited (without the secret).
func (s *Service) Set(ctx context.Context, p auth.Principal, in Preferences) (Preferences, error) {
	if p.IsAgent() {
		return Preferences{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot change how a person is told.")
	}
	var fields []apperr.FieldError
	bad := func(field, msg string) { fields = append(fields, apperr.FieldError{Field: field, Message: msg}) }
	params := db.UpsertNotificationPreferencesParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID, Email: in.Email,
		TimeZone: strings.TrimSpace(in.TimeZone), DigestMinutes: int32(in.DigestMinutes)}
	if params.TimeZone == "" {
		params.TimeZone = "UTC"
	}
	if _, err := time.LoadLocation(params.TimeZone); err != nil || len(params.TimeZone) > 64 {
		bad("time_zone", "must be a time zone name like Europe/Berlin or UTC")
	}
	if in.DigestMinutes < 0 || in.DigestMinutes > 1440 {
		bad("digest_minutes", "must be from 0 (one message per call) to 1440")
	}
	switch qs, qe := strings.TrimSpace(in.QuietStart), strings.TrimSpace(in.QuietEnd); {
	case qs == "" && qe == "":
	case qs == "" || qe == "":
		bad("quiet_hours", "needs both a start and an end, or neither")
	default:
		start, ok1 := parseClock(qs)
		end, ok2 := parseClock(qe)
		switch {
		case !ok1:
			bad("quiet_start", "must be a time of day, HH:MM")
		case !ok2:
			bad("quiet_end", "must be a time of day, HH:MM")
		case start == end:
			bad("quiet_end", "must differ from the start")
		default:
			params.QuietStart, params.QuietEnd = pgtype.Int2{Int16: start, Valid: true}, pgtype.Int2{Int16: end, Valid: true}
		}
	}
	cur, err := s.Get(ctx, p)
	if err != nil {
		return Preferences{}, err
	}
	if u := strings.TrimSpace(in.WebhookURL); u != "" {
		if msg := s.checkWebhook(ctx, p, u); msg != "" {
			bad("webhook_url", msg)
		}
		secret := cur.WebhookSecret
		if u != cur.WebhookURL || secret == "" {
			if secret, err = newSecret(); err != nil {
				return Preferences{}, err
			}
		}
		params.WebhookUrl, params.WebhookSecret = pgtype.Text{String: u, Valid: true}, pgtype.Text{String: secret, Valid: true}
	}
	if len(fields) > 0 {
		return Preferences{}, apperr.Invalid("Some settings are not valid.", fields...)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Preferences{}, fmt.Errorf("notify: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if _, err := q.UpsertNotificationPreferences(ctx, params); err != nil {
		return Preferences{}, fmt.Errorf("notify: store preferences: %w", err)
	}
	change := map[string]any{"email": in.Email, "webhook": params.WebhookUrl.String != "", "digest_minutes": in.DigestMinutes,
		"quiet_hours": params.QuietStart.Valid, "time_zone": params.TimeZone}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "notifications.preferences_changed", "user", p.UserID.String(), change); err != nil {
		return Preferences{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Preferences{}, fmt.Errorf("notify: commit preferences: %w", err)
	}
	return s.Get(ctx, p)
}

// checkWebhook says what is wrong with a webhook URL ("": nothing).
func (s *Service) checkWebhook(ctx context.Context, p auth.Principal, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || len(raw) > 2000 || u.User != nil || u.Fragment != "" {
		return "must be an absolute URL without credentials or fragment"
	}
	loopback := u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1" || u.Hostname() == "::1"
	if u.Scheme != "https" && !(u.Scheme == "http" && loopback) {
		return "must be https (http only on a loopback host)"
	}
	ws, err := s.q.GetWorkspace(ctx, p.WorkspaceID)
	if err != nil {
		return "could not be checked against the workspace's webhook allowlist; try again"
	}
	if err := policy.Check([]policy.Constraint{{Kind: policy.ConstraintDomainAllowlist, Values: allowlistOrNothing(ws.WebhookAllowlist)}},
		policy.Facts{URLs: []string{raw}}); err != nil {
		return "its host must be on the workspace's webhook allowlist (/admin/settings)"
	}
	return ""
}

// newSecret is a webhook signing secret as Standard Webhooks writes them:
// whsec_ and 24 random bytes in base64.
func newSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// Sent is one of a person's latest notifications, for their settings page.
type Sent struct {
	Channel, Kind, Tool, Status, Error string
	Attempts                           int
	Created, SentAt                    string
}

// Recent lists p's latest notifications (20).
func (s *Service) Recent(ctx context.Context, p auth.Principal) ([]Sent, error) {
	rows, err := s.q.ListMyNotifications(ctx, db.ListMyNotificationsParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID})
	if err != nil {
		return nil, fmt.Errorf("notify: list: %w", err)
	}
	out := make([]Sent, 0, len(rows))
	for _, r := range rows {
		n := Sent{Channel: r.Channel, Kind: r.Kind, Tool: r.Tool, Status: r.Status, Error: r.LastError.String, Attempts: int(r.Attempts),
			Created: r.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")}
		if r.SentAt != nil {
			n.SentAt = r.SentAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		out = append(out, n)
	}
	return out, nil
}
