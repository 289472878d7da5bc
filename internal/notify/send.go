package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/jackc/pgx/v5/pgtype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

const (
	// webhookTimeout bounds one webhook delivery.
	webhookTimeout = 10 * time.Second
	// claimRows is how many notifications the sender takes at a time, and
	// lease how long it holds them.
	claimRows = 50
	lease     = time.Minute
)

// backoff is the wait before each new attempt of a delivery that failed;
// after the last, it failed for good.
var backoff = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour}

// Send delivers the notifications that are due, a person's and channel's
// together (one message for several: a digest, or calls that came at
// once), and returns how many it took. No transaction is open while it
// mails or posts.
func (s *Service) Send(ctx context.Context) (int, error) {
	rows, err := s.q.ClaimNotifications(ctx, db.ClaimNotificationsParams{MaxRows: claimRows, LeaseSeconds: int32(lease / time.Second)})
	if err != nil {
		return 0, fmt.Errorf("notify: claim: %w", err)
	}
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].WorkspaceID == rows[start].WorkspaceID && rows[end].UserID == rows[start].UserID && rows[end].Channel == rows[start].Channel {
			end++
		}
		// Decisions and alerts go in separate messages: an alert is a page
		// (sent inside quiet hours too) and carries no one-time link.
		var decisions, alerts []db.ClaimNotificationsRow
		for _, r := range rows[start:end] {
			if isAlert(r.Kind) {
				alerts = append(alerts, r)
			} else {
				decisions = append(decisions, r)
			}
		}
		if len(decisions) > 0 {
			s.deliver(ctx, decisions)
		}
		if len(alerts) > 0 {
			s.deliverAlerts(ctx, alerts)
		}
		start = end
	}
	return len(rows), nil
}

// item is one waiting call in a message.
type item struct {
	row       db.ClaimNotificationsRow
	Kind      string    `json:"kind"` // card or packet (alert items: alert or rationale)
	Proposal  string    `json:"proposal_id"`
	Approval  string    `json:"approval_id,omitempty"`
	Tool      string    `json:"tool"`
	Summary   string    `json:"summary"`
	Risk      string    `json:"risk,omitempty"`
	Class     string    `json:"action_class,omitempty"`
	Rationale string    `json:"rationale"`
	Why       []string  `json:"why"`
	DecideURL string    `json:"decide_url,omitempty"`
	Expires   time.Time `json:"decide_url_expires_at,omitzero"`
	OpenURL   string    `json:"open_url"`
	// What an alert says of the call: how it ended (applied or failed,
	// with the error) and the agent token that proposed it.
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	Token  string `json:"token,omitempty"`
	// EscalatedTo is the role a packet was escalated to (its approver
	// role's holders did not decide in time).
	EscalatedTo string `json:"escalated_to,omitempty"`
}

// deliver sends one person's due notifications on one channel.
func (s *Service) deliver(ctx context.Context, rows []db.ClaimNotificationsRow) {
	first := rows[0]
	if at, quiet := s.quietUntil(first); quiet {
		for _, r := range rows {
			s.finish(ctx, r, s.q.DeferNotification(ctx, db.DeferNotificationParams{WorkspaceID: r.WorkspaceID, ID: r.ID, At: at}))
		}
		return
	}
	var items []item
	for _, r := range rows {
		if !stillWaiting(r) {
			s.record(ctx, r, "dropped", "", nil)
			continue
		}
		it, err := s.item(ctx, r)
		if err != nil {
			s.retry(ctx, r, err)
			continue
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return
	}
	var err error
	switch first.Channel {
	case "email":
		err = s.mail(ctx, first, items)
	case "webhook":
		err = s.post(ctx, first, PayloadType, items)
	}
	for _, it := range items {
		if err != nil {
			s.retry(ctx, it.row, err)
		} else {
			s.record(ctx, it.row, "sent", "", nil)
		}
	}
}

// stillWaiting reports whether the call still waits for the person.
func stillWaiting(r db.ClaimNotificationsRow) bool {
	if r.Kind == "packet" {
		return r.ProposalStatus == proposals.StatusPendingApproval && r.PacketStatus == "pending"
	}
	return r.ProposalStatus == proposals.StatusPending
}

// item is what a message says of one call, with its one-time link.
func (s *Service) item(ctx context.Context, r db.ClaimNotificationsRow) (item, error) {
	url, expires, err := s.newLink(ctx, r.WorkspaceID, r.UserID, r.ProposalID, r.ApprovalID, r.Arguments, r.PacketExpiresAt)
	if err != nil {
		return item{}, err
	}
	it := item{row: r, Kind: r.Kind, Proposal: r.ProposalID.String(), Tool: r.Tool, Summary: r.Summary, Risk: r.Risk.String,
		Class: r.ActionClass.String, Rationale: r.Rationale, DecideURL: url, Expires: expires.UTC(), EscalatedTo: r.EscalatedTo}
	if it.Summary == "" {
		it.Summary = "Call " + r.Tool
	}
	var d policy.Decision
	if json.Unmarshal(r.Decision, &d) == nil {
		for _, l := range d.Holding() {
			it.Why = append(it.Why, fmt.Sprintf("%s: %s", l.Layer, l.Reason))
		}
	}
	switch {
	case r.ApprovalID.Valid:
		it.Approval = r.ApprovalID.UUID.String()
		it.OpenURL = s.base + "/admin/approvals/" + it.Approval
	case r.ConversationID.Valid:
		it.OpenURL = s.base + "/conversations/" + r.ConversationID.UUID.String()
	case r.NotebookID.Valid:
		it.OpenURL = s.base + "/notebooks/" + r.NotebookID.UUID.String()
	}
	return it, nil
}

// mail sends the person one message for items: by SMTP, or held in the
// workspace outbox without a mail server. It never carries the calls'
// arguments (they may hold secrets): the link's page shows them, to the
// person signed in.
func (s *Service) mail(ctx context.Context, to db.ClaimNotificationsRow, items []item) error {
	subject := "Gatehouse: " + items[0].Summary + " waits for your decision"
	if len(items) > 1 {
		subject = fmt.Sprintf("Gatehouse: %d calls wait for your decision", len(items))
	}
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString("\n----\n\n")
		}
		who := "An agent's call waits for you to confirm or reject it."
		switch {
		case it.Kind == "packet" && it.EscalatedTo != "":
			who = fmt.Sprintf("Escalated: an agent's call waited for the %s role and nobody decided it in time; the %s role may decide it now.",
				it.row.ApproverRole, it.EscalatedTo)
		case it.Kind == "packet":
			who = "An agent's call waits for an approver's decision; you may decide it."
		}
		fmt.Fprintf(&b, "%s\n\n%s\nTool: %s\n", who, it.Summary, it.Tool)
		if it.Risk != "" {
			fmt.Fprintf(&b, "Risk: %s\n", it.Risk)
		}
		if it.Class != "" {
			fmt.Fprintf(&b, "Action class: %s\n", it.Class)
		}
		fmt.Fprintf(&b, "The agent's rationale: %s\n", it.Rationale)
		if len(it.Why) > 0 {
			fmt.Fprintf(&b, "Why it waits:\n- %s\n", strings.Join(it.Why, "\n- "))
		}
		fmt.Fprintf(&b, "\nDecide it (this link works once, for you, until %s):\n%s\n", it.Expires.Format("15:04 UTC, 2 Jan"), it.DecideURL)
		if it.OpenURL != "" {
			fmt.Fprintf(&b, "Or open it in Gatehouse: %s\n", it.OpenURL)
		}
	}
	b.WriteString("\nYou get this because a call waits for you. Choose how you are told at " + s.base + "/settings/notifications\n")
	return s.sendMail(ctx, to, subject, b.String())
}

// Payload is a webhook's body.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		Calls []item `json:"calls"`
	} `json:"data"`
}

// Webhook payload types: a decision that waits for the person, an
// irreversible call that ran or failed, a caller leaving out rationales in
// warn mode.
const (
	PayloadType          = "gatehouse.decision.requested"
	PayloadTypeAlert     = "gatehouse.call.irreversible"
	PayloadTypeRationale = "gatehouse.rationale.missing"
)

// post sends items to the person's webhook, signed as Standard Webhooks
// sign (webhook-id, webhook-timestamp, webhook-signature) with their
// secret; any answer but 2xx is a failure. The URL's host must be on the
// workspace's webhook allowlist when it is sent, not only when it was set.
func (s *Service) post(ctx context.Context, to db.ClaimNotificationsRow, typ string, items []item) error {
	if err := policy.Check([]policy.Constraint{{Kind: policy.ConstraintDomainAllowlist, Values: allowlistOrNothing(to.WebhookAllowlist)}},
		policy.Facts{URLs: []string{to.WebhookUrl}}); err != nil {
		return fmt.Errorf("the webhook's host is not on the workspace's webhook allowlist")
	}
	var p Payload
	p.Type, p.Timestamp, p.Data.Calls = typ, s.now().UTC(), items
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	wh, err := standardwebhooks.NewWebhook(to.WebhookSecret)
	if err != nil {
		return fmt.Errorf("the webhook's secret is not usable")
	}
	id := fmt.Sprintf("msg_%s_%d", to.WorkspaceID, items[0].row.ID)
	sig, err := wh.Sign(id, p.Timestamp, body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to.WebhookUrl, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the webhook's URL is not usable")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(p.Timestamp.Unix()))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("the webhook could not be reached")
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the webhook answered %d", resp.StatusCode)
	}
	return nil
}

// allowlistOrNothing is the allowlist, or a name no host has when it is
// empty (an empty domain_allowlist is malformed).
func allowlistOrNothing(list []string) []string {
	if len(list) == 0 {
		return []string{"allowlist-is-empty.invalid"}
	}
	return list
}

// quietUntil reports whether it is the person's quiet hours, and when
// they end.
func (s *Service) quietUntil(r db.ClaimNotificationsRow) (time.Time, bool) {
	if !r.QuietStart.Valid || !r.QuietEnd.Valid {
		return time.Time{}, false
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	now := s.now().In(loc)
	minute := now.Hour()*60 + now.Minute()
	start, end := int(r.QuietStart.Int16), int(r.QuietEnd.Int16)
	inside := (start <= end && minute >= start && minute < end) || (start > end && (minute >= start || minute < end))
	if !inside {
		return time.Time{}, false
	}
	wait := end - minute
	if wait <= 0 {
		wait += 24 * 60
	}
	day := time.Date(now.Year(), now.Month(), now.Day(), now.Hour(), now.Minute(), 0, 0, loc)
	return day.Add(time.Duration(wait) * time.Minute), true
}

// retry records a failed attempt: again after its backoff, or failed for
// good after the last.
func (s *Service) retry(ctx context.Context, r db.ClaimNotificationsRow, cause error) {
	s.log.Warn("notify: a delivery failed", "channel", r.Channel, "notification", r.ID, "attempt", r.Attempts, "err", cause)
	if int(r.Attempts) > len(backoff) {
		s.record(ctx, r, "failed", cause.Error(), nil)
		return
	}
	next := s.now().Add(backoff[r.Attempts-1])
	s.record(ctx, r, "queued", cause.Error(), &next)
}

func (s *Service) record(ctx context.Context, r db.ClaimNotificationsRow, status, why string, next *time.Time) {
	p := db.FinishNotificationParams{WorkspaceID: r.WorkspaceID, ID: r.ID, Status: status, NextAttemptAt: next}
	if why != "" {
		p.LastError = pgtypeText(clip.Runes(why, 500))
	}
	s.finish(ctx, r, s.q.FinishNotification(ctx, p))
}

// finish logs an outcome that could not be recorded: the lease runs out
// and the notification is taken again.
func (s *Service) finish(_ context.Context, r db.ClaimNotificationsRow, err error) {
	if err != nil {
		s.log.Error("notify: record a delivery", "notification", r.ID, "err", err)
	}
}

func pgtypeText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: true} }

// isAlert says whether a notification kind is an alert to admins rather
// than a decision that waits for the person.
func isAlert(kind string) bool { return kind == "alert" || kind == "rationale" }

// deliverAlerts sends one admin's due alerts on one channel, an alert kind
// at a time: at once, quiet hours or not (a page), without links that
// decide anything (nothing waits).
func (s *Service) deliverAlerts(ctx context.Context, rows []db.ClaimNotificationsRow) {
	for _, kind := range []string{"alert", "rationale"} {
		var items []item
		for _, r := range rows {
			if r.Kind == kind {
				items = append(items, s.alertItem(r))
			}
		}
		if len(items) == 0 {
			continue
		}
		first := items[0].row
		var err error
		switch first.Channel {
		case "email":
			err = s.alertMail(ctx, first, kind, items)
		case "webhook":
			typ := PayloadTypeAlert
			if kind == "rationale" {
				typ = PayloadTypeRationale
			}
			err = s.post(ctx, first, typ, items)
		}
		for _, it := range items {
			if err != nil {
				s.retry(ctx, it.row, err)
			} else {
				s.record(ctx, it.row, "sent", "", nil)
			}
		}
	}
}

// alertItem is what an alert says of one call.
func (s *Service) alertItem(r db.ClaimNotificationsRow) item {
	it := item{row: r, Kind: r.Kind, Proposal: r.ProposalID.String(), Tool: r.Tool, Summary: r.Summary, Risk: r.Risk.String,
		Class: r.ActionClass.String, Rationale: r.Rationale, Status: r.ProposalStatus, Error: r.Error.String, Token: r.TokenName,
		OpenURL: s.base + "/audit?object=" + r.ProposalID.String()}
	if it.Summary == "" {
		it.Summary = "Call " + r.Tool
	}
	return it
}

// alertMail tells an admin of irreversible calls that ran or failed, or
// of a caller leaving out rationales. Like every message, it never carries
// the calls' arguments.
func (s *Service) alertMail(ctx context.Context, to db.ClaimNotificationsRow, kind string, items []item) error {
	var subject string
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString("\n----\n\n")
		}
		who := "a person"
		if it.Token != "" {
			who = "the agent token " + it.Token
		}
		switch {
		case kind == "rationale":
			subject = "Gatehouse: " + who + " calls tools without a rationale"
			fmt.Fprintf(&b, "In rationale warn mode, %s called %s without the rationale strict mode requires; the call was accepted with a warning. "+
				"This is the first such call from it today (one alert per caller and day).\n", who, it.Tool)
		case it.Status == proposals.StatusFailed:
			subject = "Gatehouse: an irreversible call failed: " + it.Summary
			fmt.Fprintf(&b, "An irreversible call failed.\n\n%s\nTool: %s\nError: %s\n", it.Summary, it.Tool, it.Error)
		default:
			subject = "Gatehouse: an irreversible call ran: " + it.Summary
			fmt.Fprintf(&b, "An irreversible call ran; it cannot be undone by any tool.\n\n%s\nTool: %s\n", it.Summary, it.Tool)
		}
		if kind != "rationale" {
			fmt.Fprintf(&b, "Proposed by: %s\n", who)
			if it.Class != "" {
				fmt.Fprintf(&b, "Action class: %s\n", it.Class)
			}
			fmt.Fprintf(&b, "The agent's rationale: %s\n", it.Rationale)
		}
		fmt.Fprintf(&b, "Its history: %s\n", it.OpenURL)
	}
	if len(items) > 1 {
		subject = fmt.Sprintf("Gatehouse: %d alerts", len(items))
	}
	why := "irreversible calls alert on every execution and failure"
	if kind == "rationale" {
		why = "callers that leave out rationales in warn mode alert once a day each"
	}
	b.WriteString("\nYou get this as an admin of the workspace: " + why + ". Choose how you are told at " + s.base + "/settings/notifications\n")
	return s.sendMail(ctx, to, subject, b.String())
}

// sendMail mails the person by SMTP, or holds the message in the
// workspace outbox without a mail server.
func (s *Service) sendMail(ctx context.Context, to db.ClaimNotificationsRow, subject, body string) error {
	if s.mailer == nil {
		_, err := s.q.InsertOutbox(ctx, db.InsertOutboxParams{WorkspaceID: to.WorkspaceID, Kind: "email", Recipient: to.UserEmail,
			Subject: pgtypeText(subject), Body: body})
		return err
	}
	return s.mailer.Send(ctx, to.UserEmail, subject, body)
}
