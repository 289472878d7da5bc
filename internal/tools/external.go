package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// The tools that reach beyond the workspace's records: mail and webhooks
// (kept in the workspace outbox), bulk deletion, and payments, which only
// the principal performs.

// Action classes of email.send, computed from the recipient's domain.
const (
	ClassEmailInternal = "email.send.internal"
	ClassEmailExternal = "email.send.external"
)

// ClassWebhookPost is webhook.post's class. It is not canonical: Builtin
// registers it, in the external group.
const ClassWebhookPost = "webhook.post"

// EmptyAllowlistDomain stands in for an empty webhook allowlist. A
// domain_allowlist constraint with no values is malformed, and Check would
// refuse every call as "malformed", which reads like a bug; a reserved
// .invalid name (RFC 6761), which no real host can have, refuses every
// host as "not on the allowlist" instead, and names the cause.
const EmptyAllowlistDomain = "allowlist-is-empty.invalid"

// webhookTimeout bounds a webhook delivery, connection to last byte.
const webhookTimeout = 10 * time.Second

// classifyEmail is email.send.internal when the recipient's domain is one of
// the workspace's internal domains or a subdomain of one (case-insensitive),
// otherwise email.send.external; an address without a domain is external.
func classifyEmail(args map[string]any, ws Workspace) string {
	to, _ := args["to"].(string)
	i := strings.LastIndexByte(to, '@')
	if i < 0 {
		return ClassEmailExternal
	}
	domain := normalizeDomain(to[i+1:])
	if domain == "" {
		return ClassEmailExternal
	}
	for _, d := range ws.InternalDomains {
		if d = normalizeDomain(d); d != "" && (domain == d || strings.HasSuffix(domain, "."+d)) {
			return ClassEmailInternal
		}
	}
	return ClassEmailExternal
}

// normalizeDomain lowercases a domain and drops a leading "@" and a
// trailing ".", as the policy package reads domains.
func normalizeDomain(d string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(d)), "@"), ".")
}

// webhookConstraints is the workspace's webhook allowlist as a
// domain_allowlist constraint. Blank entries match no host and would make
// the constraint malformed, so they are dropped; an allowlist with nothing
// left refuses every host (see EmptyAllowlistDomain).
func webhookConstraints(ws Workspace) []policy.Constraint {
	allow := slices.DeleteFunc(slices.Clone(ws.WebhookAllowlist), func(v string) bool { return strings.Trim(v, " @.") == "" })
	if len(allow) == 0 {
		allow = []string{EmptyAllowlistDomain}
	}
	return []policy.Constraint{{Kind: policy.ConstraintDomainAllowlist, Values: allow}}
}

// stringArg is args[name] as a string, "" when it is not one: a fact the
// constraint checker cannot read then fails its check.
func stringArg(args map[string]any, name string) string {
	s, _ := args[name].(string)
	return s
}

// amountFacts gives the call's amount; one that is not a number is NaN, which
// no max_amount holds for (fail closed).
func amountFacts(args map[string]any) policy.Facts {
	amount := math.NaN()
	switch v := args["amount"].(type) {
	case float64:
		amount = v
	case json.Number:
		if f, err := v.Float64(); err == nil {
			amount = f
		}
	}
	return policy.Facts{Amount: &amount}
}

// holdEmail runs email.send without a mail server: the message is held in
// the workspace outbox (shown at /admin/outbox), an effect in the database.
func holdEmail(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[emailArgs](args)
	if err != nil {
		return nil, err
	}
	return recordEmail(a, "outbox")(ctx, q, ws)
}

// sendEmail runs email.send with a mail server: the message is delivered
// with no transaction open, then recorded in the outbox with the call's
// result. A crash in between leaves the call "applying" for a person to
// review; it is never sent twice on its own.
func sendEmail(mailer Mailer) Deliverer {
	return func(ctx context.Context, _ Workspace, args json.RawMessage) (Recorder, error) {
		a, err := decode[emailArgs](args)
		if err != nil {
			return nil, err
		}
		if err := mailer.Send(ctx, a.To, a.Subject, a.Body); err != nil {
			return nil, apperr.Errorf(apperr.EINVALID, "The mail server did not take the message: %s.", sanitizeSMTP(err))
		}
		return recordEmail(a, "smtp"), nil
	}
}

type emailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

func recordEmail(a emailArgs, deliveredTo string) Recorder {
	return func(ctx context.Context, q *db.Queries, ws uuid.UUID) (any, error) {
		row, err := q.InsertOutbox(ctx, db.InsertOutboxParams{WorkspaceID: ws, Kind: "email", Recipient: a.To,
			Subject: pgtype.Text{String: a.Subject, Valid: true}, Body: a.Body})
		if err != nil {
			return nil, fmt.Errorf("tools: record email: %w", err)
		}
		return map[string]any{"delivered_to": deliveredTo, "outbox_id": row.ID, "to": a.To}, nil
	}
}

// sanitizeSMTP keeps an SMTP error to its first line, which is safe to
// show (no credentials travel in server replies).
func sanitizeSMTP(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// newWebhookClient is the client webhook.post delivers with: a 10-second
// limit, and redirects are answered, not followed, so a receiver on the
// allowlist cannot bounce the call to a host that is not.
func newWebhookClient() *http.Client {
	return &http.Client{
		Timeout:       webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// postWebhook runs webhook.post with client: it POSTs the payload as JSON,
// with no transaction open, and then records the delivery and its status
// in the workspace outbox with the call's result. Anything but a 2xx answer
// fails the call, and nothing is recorded. A crash between the delivery and
// its record leaves the call "applying" for a person to review.
//
// The workspace's allowlist, as the effect-time decision read it, is
// checked here again, so no path to this deliverer can post to a host off
// the allowlist.
func postWebhook(client *http.Client) Deliverer {
	return func(ctx context.Context, ws Workspace, args json.RawMessage) (Recorder, error) {
		a, err := decode[struct {
			URL     string          `json:"url"`
			Payload json.RawMessage `json:"payload"`
		}](args)
		if err != nil {
			return nil, err
		}
		err = policy.Check(webhookConstraints(ws), policy.Facts{URLs: []string{a.URL}})
		var v *policy.Violation
		if errors.As(err, &v) {
			return nil, apperr.Errorf(apperr.EFORBIDDEN, "The webhook was not sent: %s.", v.Error())
		}
		if err != nil {
			return nil, fmt.Errorf("tools: check webhook allowlist: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(a.Payload))
		if err != nil {
			return nil, apperr.Errorf(apperr.EINVALID, "The webhook URL %q cannot be posted to.", a.URL)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "gatehouse-webhook")
		resp, err := client.Do(req)
		if err != nil {
			return nil, apperr.Errorf(apperr.EINVALID, "The webhook at %s was not delivered: %s.", a.URL, deliveryFailure(err))
		}
		// Drain a little so the connection can be reused; the body is not kept.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return nil, apperr.Errorf(apperr.EINVALID, "The webhook at %s answered %s, so the call failed.", a.URL, resp.Status)
		}
		return func(ctx context.Context, q *db.Queries, ws uuid.UUID) (any, error) {
			row, err := q.InsertOutbox(ctx, db.InsertOutboxParams{WorkspaceID: ws, Kind: "webhook", Recipient: a.URL,
				Body: string(a.Payload), ResponseStatus: pgtype.Int4{Int32: int32(resp.StatusCode), Valid: true}})
			if err != nil {
				return nil, fmt.Errorf("tools: record webhook: %w", err)
			}
			return map[string]any{"status": resp.StatusCode, "outbox_id": row.ID}, nil
		}, nil
	}
}

// deliveryFailure says why a request got no answer, without the transport's
// internals.
func deliveryFailure(err error) string {
	var dns *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dns):
		return "its host was not found"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("it did not answer within %s", webhookTimeout)
	case errors.Is(err, context.Canceled):
		return "the call was cancelled"
	}
	return "the connection failed"
}

// bulkDeleteRecords runs records.bulk_delete: one statement deletes the
// listed keys of the collection in this workspace; keys that did not exist
// are reported as missing, not as an error.
func bulkDeleteRecords(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[struct {
		Collection string   `json:"collection"`
		Keys       []string `json:"keys"`
	}](args)
	if err != nil {
		return nil, err
	}
	gone, err := q.DeleteRecordsByKeys(ctx, db.DeleteRecordsByKeysParams{WorkspaceID: ws, Collection: a.Collection, Keys: a.Keys})
	if err != nil {
		return nil, fmt.Errorf("tools: bulk delete records: %w", err)
	}
	deleted := make(map[string]bool, len(gone))
	for _, k := range gone {
		deleted[k] = true
	}
	// Both lists keep the caller's order.
	keys, missing := []string{}, []string{}
	seen := map[string]bool{}
	for _, k := range a.Keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if deleted[k] {
			keys = append(keys, k)
		} else {
			missing = append(missing, k)
		}
	}
	return map[string]any{"collection": a.Collection, "deleted": len(keys), "keys": keys, "missing": missing}, nil
}

// recordPayment runs payment.initiate. Its class is human-only, so no agent
// call ever reaches it: it runs when the principal records that they
// performed the payment themselves, and it records a performed payment
// request. It moves no money.
func recordPayment(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
		Payee    string  `json:"payee"`
	}](args)
	if err != nil {
		return nil, err
	}
	r, err := q.InsertPaymentRequest(ctx, db.InsertPaymentRequestParams{WorkspaceID: ws, Amount: a.Amount, Currency: a.Currency, Payee: a.Payee})
	if err != nil {
		return nil, fmt.Errorf("tools: record payment: %w", err)
	}
	return map[string]any{"payment_request_id": r.ID, "status": r.Status, "amount": r.Amount, "currency": r.Currency, "payee": r.Payee}, nil
}
