package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

const collectionSchema = `{"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,100}$", "description": "The collection: letters, digits, _ . -", "maxLength": 100}`
const keySchema = `{"type": "string", "minLength": 1, "maxLength": 200, "description": "The record's key within its collection"}`

// Builtin returns the registry of built-in tools, which act on the
// workspace's records store in PostgreSQL.
func Builtin() (*Registry, error) {
	return NewRegistry(policy.DefaultClasses(),
		Tool{
			Name: "records.search", Effect: policy.EffectRead,
			Description: "Find records whose key or value contains the query, optionally in one collection.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["query"],
				"properties": {"query": {"type": "string", "maxLength": 200, "description": "Text to find in keys and values"}, "collection": ` + collectionSchema + `}}`),
			Contract: Contract{Authority: policy.AuthorityRead, ActionClass: "read.context"},
			Execute:  searchRecords,
		},
		Tool{
			Name: "records.get", Effect: policy.EffectRead,
			Description: "Read one record by collection and key.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `}}`),
			Contract: Contract{Authority: policy.AuthorityRead, ActionClass: "read.context"},
			Execute:  getRecord,
		},
		Tool{
			Name: "records.put", Effect: policy.EffectMutate,
			Description: "Create or replace a record's value (upsert by collection and key).",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key", "value"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `, "value": {"type": "object", "description": "The new value: any JSON object"}}}`),
			Contract: Contract{Authority: policy.AuthorityWriteIdempotent, ActionClass: "tool.call.local",
				Idempotency: Idempotency{KeyFields: []string{"collection", "key"}}},
			Execute: putRecord,
		},
		Tool{
			Name: "notes.append", Effect: policy.EffectMutate,
			Description: "Append a note to an existing record.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key", "text"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `, "text": {"type": "string", "minLength": 1, "maxLength": 5000, "description": "The note to append"}}}`),
			Contract: Contract{Authority: policy.AuthorityWriteNonIdempotent, ActionClass: "tool.call.local",
				Idempotency: Idempotency{Required: true}},
			Execute: appendNote,
		},
		Tool{
			Name: "records.delete", Effect: policy.EffectDestructive,
			Description: "Delete a record. It cannot be undone.",
			Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["collection", "key"],
				"properties": {"collection": ` + collectionSchema + `, "key": ` + keySchema + `}}`),
			Contract: Contract{Authority: policy.AuthorityIrreversible, Risk: policy.RiskMedium, ActionClass: "tool.call.local",
				Idempotency: Idempotency{Required: true},
				Gating: Gating{NotGatedReason: "The records are the workspace's own; the owner's confirm card, " +
					"shown for this tool in every conversation mode, is the human gate."}},
			Execute: deleteRecord,
		},
	)
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

func searchRecords(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
	a, err := decode[struct {
		Query      string  `json:"query"`
		Collection *string `json:"collection"`
	}](args)
	if err != nil {
		return nil, err
	}
	p := db.SearchRecordsParams{WorkspaceID: ws, Query: a.Query}
	if a.Collection != nil {
		p.Collection = pgtype.Text{String: *a.Collection, Valid: true}
	}
	rows, err := q.SearchRecords(ctx, p)
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
