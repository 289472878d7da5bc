package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

const collectionSchema = `{"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,100}$", "description": "The collection: letters, digits, _ . -", "maxLength": 100}`
const keySchema = `{"type": "string", "minLength": 1, "maxLength": 200, "description": "The record's key within its collection"}`

// Option configures the built-in tools.
type Option func(*options)

type options struct{ mailer Mailer }

// WithMailer delivers email.send's messages with m (SMTP) instead of
// holding them in the outbox.
func WithMailer(m Mailer) Option { return func(o *options) { o.mailer = m } }

// Builtin returns the registry of built-in tools: those that act on the
// workspace's records store in PostgreSQL, and those that reach beyond it
// (mail and webhooks through the workspace outbox, payments the principal
// performs; see external.go). Its classes are the canonical ones plus
// webhook.post and tool.call.external (an upstream tool that reaches the
// outside world), in the external group. The tools of MCP upstreams join
// it when they are listed (Registry.ReplaceUpstream).
func Builtin(opts ...Option) (*Registry, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	classes, err := policy.NewClassRegistry(map[string]policy.ClassGroup{ClassWebhookPost: policy.GroupExternal, ClassToolCallExternal: policy.GroupExternal})
	if err != nil {
		return nil, fmt.Errorf("tools: classes: %w", err)
	}
	email := emailTool()
	if o.mailer != nil {
		// With a mail server the effect is outside the database: delivered
		// with no transaction open, then recorded.
		email.Execute, email.Deliver, email.Timeout = nil, sendEmail(o.mailer), smtpTimeout+time.Second
	}
	decls := []Tool{
		{
			Name: "records.search", Effect: policy.EffectRead,
			Description: "Find records, case-insensitively, optionally in one collection: a query of 3 characters or more anywhere in a key or value, " +
				"a shorter one at the start of a key. At most 50 records.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["query"],
				"properties": {"query": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Text to find: 3 characters or more anywhere in keys and values; 1 or 2 at the start of a key"}, "collection": ` + collectionSchema + `}}`),
			// Risk low, ADR-036 rule "low: read-only operations".
			Contract: Contract{Authority: policy.AuthorityRead, Risk: policy.RiskLow, ActionClass: "read.context",
				ClassRationale: "Pure read: it finds records and changes nothing.", PIIFields: recordPII, SLA: searchSLA},
			Execute: searchRecords,
		},
		{
			Name: "records.get", Effect: policy.EffectRead,
			Description: "Read one record by collection and key.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `}}`),
			// Risk low, ADR-036 rule "low: read-only operations".
			Contract: Contract{Authority: policy.AuthorityRead, Risk: policy.RiskLow, ActionClass: "read.context",
				ClassRationale: "Pure read: it returns one record and changes nothing.", PIIFields: recordPII, SLA: inDatabaseSLA},
			Execute: getRecord,
		},
		{
			Name: "records.put", Effect: policy.EffectMutate,
			Description: "Create or replace a record's value (upsert by collection and key).",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key", "value"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `, "value": {"type": "object", "description": "The new value: any JSON object"}}}`),
			// Risk medium, ADR-036 rule "medium: write operations on internal
			// records" (an upsert of the workspace's own record).
			Contract: Contract{Authority: policy.AuthorityWriteIdempotent, Risk: policy.RiskMedium, ActionClass: "tool.call.local",
				Idempotency: Idempotency{KeyFields: []string{"collection", "key"}},
				ClassRationale: "Upserts one record: collection and key are its idempotency key (one record per key), " +
					"so sending the same value again leaves the same record.",
				Reversibility: "Another records.put with the earlier value overwrites it (the earlier value is not kept).",
				SLA:           inDatabaseSLA},
			Execute: putRecord,
		},
		{
			Name: "notes.append", Effect: policy.EffectMutate,
			Description: "Append a note to an existing record.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key", "text"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `, "text": {"type": "string", "minLength": 1, "maxLength": 5000, "description": "The note to append"}}}`),
			// Risk medium, ADR-036 rule "medium: write operations on internal
			// records" (it adds to a record, it removes nothing).
			Contract: Contract{Authority: policy.AuthorityWriteNonIdempotent, Risk: policy.RiskMedium, ActionClass: "tool.call.local",
				Idempotency:    Idempotency{Required: true},
				ClassRationale: "Each call appends another note to the record: a retry without the same idempotency key appends it twice.",
				Reversibility:  "No tool removes a note: records.put can replace the record's value, not its notes.",
				SLA:            inDatabaseSLA},
			Execute: appendNote,
		},
		{
			Name: "records.delete", Effect: policy.EffectDestructive,
			Description: "Delete a record. It cannot be undone.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `}}`),
			// Risk high, ADR-036 rule "high: destructive operations" (it
			// cannot be undone): the risk gate sends each call to an approver.
			Contract: Contract{Authority: policy.AuthorityIrreversible, Risk: policy.RiskHigh, ActionClass: "tool.call.local",
				Idempotency: Idempotency{Required: true},
				Gating: Gating{NotGatedReason: "Its high risk is the human gate: every call waits for an approver unless the workspace " +
					"auto-approves high risk, and then for the owner's confirm card, shown for this tool in every mode."},
				ClassRationale: "Deletes the record with its notes: no tool in Gatehouse restores a deleted record.",
				Reversibility:  "None via tools. The call's result holds the deleted value, so a person can write it again with records.put; its notes are lost.",
				SLA:            inDatabaseSLA},
			Execute: deleteRecord,
		},
		email,
		{
			Name: "webhook.post", Effect: policy.EffectMutate,
			Description: "POST a JSON payload to a webhook URL on the workspace's allowlist. Any answer but 2xx fails the call.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["url", "payload"],
				"properties": {"url": {"type": "string", "pattern": "^https?://", "maxLength": 2000, "description": "The webhook's http or https URL; its host must be on the workspace's allowlist"},
					"payload": {"type": "object", "description": "The JSON object to post"}}}`),
			// Risk high, ADR-036 rule "high: external-messaging operations"
			// (it sends the payload outside the workspace).
			Contract: Contract{Authority: policy.AuthorityWriteNonIdempotent, Risk: policy.RiskHigh, ActionClass: ClassWebhookPost,
				Idempotency:          Idempotency{Required: true},
				RateLimits:           RateLimits{PerAgentPerMinute: 30},
				WorkspaceConstraints: webhookConstraints,
				Facts:                func(a map[string]any) policy.Facts { return policy.Facts{URLs: []string{stringArg(a, "url")}} },
				Summarize:            func(a map[string]any) string { return "POST a webhook to " + stringArg(a, "url") },
				ClassRationale:       "Each call posts the payload again: the receiver sees every retry that lacks the same idempotency key.",
				Reversibility:        "Gatehouse has no tool that takes a delivered webhook back: only the receiver can undo what it did with it."},
			Deliver: postWebhook(newWebhookClient()), Timeout: webhookTimeout + time.Second,
		},
		{
			Name: "records.bulk_delete", Effect: policy.EffectDestructive,
			Description: "Delete several records of one collection at once. It cannot be undone; more than ten keys need an approver.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "keys"],
				"properties": {"collection": ` + collectionSchema + `,
					"keys": {"type": "array", "items": ` + keySchema + `, "minItems": 1, "maxItems": 1000, "uniqueItems": true, "description": "The keys of the records to delete, each once"}}}`),
			// Risk high, ADR-036 rule "high: destructive operations" (it
			// cannot be undone); more than ten keys also need the contract's
			// approver.
			Contract: Contract{Authority: policy.AuthorityIrreversible, Risk: policy.RiskHigh, ActionClass: "tool.call.local",
				Idempotency: Idempotency{Required: true},
				Gating:      Gating{Threshold: "count(keys) > 10"},
				Summarize: func(a map[string]any) string {
					keys, _ := a["keys"].([]any)
					return fmt.Sprintf("Delete %d records from collection %q", len(keys), stringArg(a, "collection"))
				},
				ClassRationale: "Deletes records with their notes: no tool in Gatehouse restores a deleted record.",
				Reversibility:  "None via tools. A person can write a deleted value again with records.put, if they kept it; its notes are lost.",
				SLA:            bulkDeleteSLA},
			Execute: bulkDeleteRecords,
		},
		{
			Name: "payment.initiate", Effect: policy.EffectDestructive,
			Description: "Pay a payee. Only the principal can perform a payment; an agent's call waits for them, and running it records that they did.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["amount", "currency", "payee"],
				"properties": {"amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9, "multipleOf": 0.01, "description": "The amount, in the currency's units, to the cent"},
					"currency": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "The ISO 4217 currency code, such as EUR"},
					"payee": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Who is paid"}}}`),
			// Risk high, ADR-036 rule "high: financial operations".
			Contract: Contract{Authority: policy.AuthorityIrreversible, Risk: policy.RiskHigh, ActionClass: "payment.initiate",
				Idempotency: Idempotency{Required: true},
				Gating:      Gating{Required: true, ApproverRole: "admin"},
				Facts:       amountFacts,
				Summarize: func(a map[string]any) string {
					amount, _ := a["amount"].(float64)
					return fmt.Sprintf("Pay %.2f %s to %s", amount, stringArg(a, "currency"), stringArg(a, "payee"))
				},
				ClassRationale: "A payment sends money out of the workspace: no tool can take it back.",
				Reversibility:  "None via tools. A refund is the payee's or the bank's to make, outside Gatehouse.",
				PIIFields:      []string{"payee"}},
			Execute: recordPayment,
		},
	}
	for i := range decls {
		decls[i].Cheatsheet = builtinCheatsheets[decls[i].Name]
	}
	return NewRegistry(classes, decls...)
}

// recordPII are the fields of a record's value that commonly hold personal
// data: a read that returns one names them on its audit row (what was
// read), and the audit export redacts them in any arguments.
var recordPII = []string{"email", "phone", "address", "birth_date"}

// The service levels the in-database tools state: the 95th percentile of
// the gate's answer to a call that runs at once (decision, the tool and
// its record, durable before the answer), and the share of calls that
// succeed, bounded by PostgreSQL's own. `make bench` measures the first
// against them under load on two cores (docs/performance.md "Against the
// stated SLA"), where the p99 was 20-30 ms at 8 clients. The tools that
// leave the database (email.send with a mail server, webhook.post) and
// payment.initiate (a person performs it) state none: their time is the
// receiver's or the person's, bounded only by their timeouts.
var (
	inDatabaseSLA = SLA{P95Latency: 50 * time.Millisecond, Availability: "99.9%"}
	// A search reads the trigram indexes: it is given twice the time.
	searchSLA = SLA{P95Latency: 100 * time.Millisecond, Availability: "99.9%"}
	// Up to 1,000 keys in one statement.
	bulkDeleteSLA = SLA{P95Latency: 250 * time.Millisecond, Availability: "99.9%"}
)

// emailTool is email.send's declaration; without a mail server it holds
// mail in the workspace outbox.
func emailTool() Tool {
	return Tool{
		Name: "email.send", Effect: policy.EffectMutate,
		Description: "Send an email. It is written to the workspace outbox, from which mail is delivered.",
		Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["to", "subject", "body"],
			"properties": {"to": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", "maxLength": 254, "description": "The recipient's email address"},
				"subject": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The subject line"},
				"body": {"type": "string", "minLength": 1, "maxLength": 20000, "description": "The message, as plain text"}}}`),
		// Risk high, ADR-036 rule "high: external-messaging operations"
		// (aws_ses_send, gmail send): internal mail too, since the rule
		// names the operation, not the recipient.
		Contract: Contract{Authority: policy.AuthorityWriteNonIdempotent, Risk: policy.RiskHigh,
			Classify: classifyEmail, ActionClasses: []string{ClassEmailInternal, ClassEmailExternal},
			Idempotency: Idempotency{Required: true},
			RateLimits:  RateLimits{PerAgentPerMinute: 10, PerWorkspacePerHour: 100, PerWorkspacePerDay: 500},
			Facts:       func(a map[string]any) policy.Facts { return policy.Facts{Recipients: []string{stringArg(a, "to")}} },
			Summarize: func(a map[string]any) string {
				return fmt.Sprintf("Send email to %s: %s", stringArg(a, "to"), stringArg(a, "subject"))
			},
			ClassRationale: "Each call sends another message: a retry without the same idempotency key mails the recipient twice.",
			Reversibility:  "A delivered message cannot be recalled; a later message can only correct it.",
			PIIFields:      []string{"to"}},
		Execute: holdEmail,
	}
}

// recordView is how a record appears in a tool result.
type recordView struct {
	Collection string          `json:"collection"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	Notes      json.RawMessage `json:"notes,omitempty"`
	UpdatedAt  string          `json:"updated_at,omitempty"`
}

func decode[T any](args json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(args, &v); err != nil {
		return v, fmt.Errorf("tools: decode arguments: %w", err)
	}
	return v, nil
}

func notFound(collection, key string) error {
	return apperr.Errorf(apperr.ENOTFOUND, "No record %q in collection %q.", key, collection)
}

// trigramLength is the shortest query the trigram indexes serve (pg_trgm
// indexes three characters at a time). A shorter one would read every
// record of the workspace, so it matches the start of a key instead,
// through an index walked in the results' order (migration 26).
const trigramLength = 3

// likeLiteral escapes ILIKE's wildcards (and its escape character), so a
// query's "_" or "%" finds itself, not any character or any text.
var likeLiteral = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func searchRecords(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[struct {
		Query      string  `json:"query"`
		Collection *string `json:"collection"`
	}](args)
	if err != nil {
		return nil, err
	}
	var rows []db.SearchRecordsRow
	switch {
	case utf8.RuneCountInString(a.Query) >= trigramLength:
		p := db.SearchRecordsParams{WorkspaceID: ws, Query: likeLiteral.Replace(a.Query)}
		if a.Collection != nil {
			p.Collection = pgtype.Text{String: *a.Collection, Valid: true}
		}
		rows, err = q.SearchRecords(ctx, p)
	case a.Collection != nil:
		var found []db.SearchCollectionByKeyPrefixRow
		found, err = q.SearchCollectionByKeyPrefix(ctx, db.SearchCollectionByKeyPrefixParams{WorkspaceID: ws, Collection: *a.Collection, Prefix: a.Query})
		for _, r := range found {
			rows = append(rows, db.SearchRecordsRow(r))
		}
	default:
		var found []db.SearchRecordsByKeyPrefixRow
		found, err = q.SearchRecordsByKeyPrefix(ctx, db.SearchRecordsByKeyPrefixParams{WorkspaceID: ws, Prefix: a.Query})
		for _, r := range found {
			rows = append(rows, db.SearchRecordsRow(r))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tools: search records: %w", err)
	}
	out := make([]recordView, len(rows))
	for i, r := range rows {
		out[i] = recordView{Collection: r.Collection, Key: r.Key, Value: r.Value, Notes: r.Notes, UpdatedAt: r.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z")}
	}
	return map[string]any{"records": out, "count": len(out)}, nil
}

type recordRef struct {
	Collection string `json:"collection"`
	Key        string `json:"key"`
}

func getRecord(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[recordRef](args)
	if err != nil {
		return nil, err
	}
	r, err := q.GetRecord(ctx, db.GetRecordParams{WorkspaceID: ws, Collection: a.Collection, Key: a.Key})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(a.Collection, a.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("tools: get record: %w", err)
	}
	return recordView{Collection: r.Collection, Key: r.Key, Value: r.Value, Notes: r.Notes, UpdatedAt: r.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z")}, nil
}

func putRecord(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[struct {
		recordRef
		Value json.RawMessage `json:"value"`
	}](args)
	if err != nil {
		return nil, err
	}
	r, err := q.PutRecord(ctx, db.PutRecordParams{WorkspaceID: ws, Collection: a.Collection, Key: a.Key, Value: a.Value})
	if err != nil {
		return nil, fmt.Errorf("tools: put record: %w", err)
	}
	return map[string]any{"collection": r.Collection, "key": r.Key, "value": r.Value, "created": r.Created}, nil
}

func appendNote(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[struct {
		recordRef
		Text string `json:"text"`
	}](args)
	if err != nil {
		return nil, err
	}
	r, err := q.AppendRecordNote(ctx, db.AppendRecordNoteParams{WorkspaceID: ws, Collection: a.Collection, Key: a.Key, Text: a.Text})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(a.Collection, a.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("tools: append note: %w", err)
	}
	var notes []json.RawMessage
	json.Unmarshal(r.Notes, &notes)
	return map[string]any{"collection": r.Collection, "key": r.Key, "notes": len(notes)}, nil
}

func deleteRecord(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[recordRef](args)
	if err != nil {
		return nil, err
	}
	r, err := q.DeleteRecord(ctx, db.DeleteRecordParams{WorkspaceID: ws, Collection: a.Collection, Key: a.Key})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(a.Collection, a.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("tools: delete record: %w", err)
	}
	return map[string]any{"deleted": true, "collection": r.Collection, "key": r.Key, "value": r.Value}, nil
}
