package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The fill copies what the server itself wrote. The volume phase makes a
// few real calls through the API (one of each outcome), reads back every
// row each wrote (snapshot before, diff after), and writes variations of
// those rows: fresh ids, the call's conversation, a key and a rationale
// of its own, every timestamp shifted to the call's time. The rows go in
// through the real schema (constraints, domains, triggers, foreign keys)
// with INSERT … SELECT FROM jsonb_populate_recordset, whole rows as JSON,
// so a column a later migration adds is copied as the server wrote it
// without the bench knowing of it. Receipts are chained here, as the
// sequencer would chain them, so the server has nothing to catch up on.

// fillTables are the tables the fill writes, in the order their foreign
// keys need, each with the expression its rows are told apart by. The
// tool's own rows (records), idempotency keys and rate counters are not
// copied: no page reads them, and keys and counters expire.
var fillTables = []struct{ name, key string }{
	{"conversations", "id::text"},
	{"notebooks", "id::text"},
	{"proposals", "id::text"},
	{"messages", "id::text"},
	{"audit_events", "id::text"},
	{"receipts", "id::text"},
	{"approvals", "id::text"},
	{"approval_votes", "approval_id::text || ' ' || user_id::text"},
	{"evidence", "id::text"},
	{"feedback", "id::text"},
	{"outbox", "id::text"},
}

// capturedRow is one row a seeded action wrote, as to_jsonb gives it.
type capturedRow struct {
	table, key string
	json       []byte
}

// snapshot is the keys of every row of the fill's tables.
type snapshot map[string]map[string]bool

func takeSnapshot(ctx context.Context, pool *pgxpool.Pool) (snapshot, error) {
	s := snapshot{}
	for _, t := range fillTables {
		rows, err := pool.Query(ctx, fmt.Sprintf("SELECT %s FROM %s", t.key, t.name))
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", t.name, err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", t.name, err)
		}
		s[t.name] = map[string]bool{}
		for _, k := range keys {
			s[t.name][k] = true
		}
	}
	return s, nil
}

// newRows are the rows that are not in the snapshot, as they are now.
func (s snapshot) newRows(ctx context.Context, pool *pgxpool.Pool) ([]capturedRow, error) {
	var out []capturedRow
	for _, t := range fillTables {
		// Without generated columns (approvals.resolver_roles): PostgreSQL
		// computes them, and refuses a value for one.
		rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT %s, (to_jsonb(t) - ARRAY(SELECT attname::text FROM pg_attribute
			WHERE attrelid = '%s'::regclass AND attgenerated <> '' AND NOT attisdropped))::text FROM %s t ORDER BY %s`, t.key, t.name, t.name, t.key))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
		var key, js string
		_, err = pgx.ForEachRow(rows, []any{&key, &js}, func() error {
			if !s[t.name][key] {
				out = append(out, capturedRow{table: t.name, key: key, json: []byte(js)})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
	}
	return out, nil
}

// capture runs action and returns the rows it wrote.
func capture(ctx context.Context, pool *pgxpool.Pool, action func() error) ([]capturedRow, error) {
	before, err := takeSnapshot(ctx, pool)
	if err != nil {
		return nil, err
	}
	if err := action(); err != nil {
		return nil, err
	}
	return before.newRows(ctx, pool)
}

// The seeded actions write these values where a copy gets its own.
const (
	templateKey       = "volume-template-key"
	templateRationale = "volume template rationale"
	templateTitle     = "volume template title"
	evidenceIDToken   = "volume-template-evidence-id-" // and the template's evidence id
)

type tokenKind uint8

const (
	tokID         tokenKind = iota // a row's uuid: a fresh one per copy (or the one the copy is given)
	tokTime                        // a timestamp: shifted to the copy's time
	tokKey                         // a record's key
	tokRationale                   // a call's rationale
	tokTitle                       // a conversation's or notebook's title
	tokEvidenceID                  // an evidence row's id, from its identity sequence
)

type token struct {
	text    string // as it appears in the rows' JSON
	kind    tokenKind
	at      time.Time // tokTime
	version byte      // tokID: the uuid's version (7: time-ordered)
	// optional: only the template's optional rows have it, so a copy
	// without them needs no value (no evidence id is taken for nothing).
	optional bool
}

// templateRow is a row's JSON cut at its tokens: parts[0] slot[0]
// parts[1] … parts[n].
type templateRow struct {
	table    string
	parts    []string
	slots    []int // token indexes
	optional bool  // written only with the copy's evidence
}

// template is the rows one seeded action wrote, ready to be copied.
type template struct {
	name   string
	rows   []templateRow
	tokens []token
	at     time.Time // when its first row was created: a copy's timestamps shift by its time minus this
}

// readIdentityColumns names each fill table's identity columns.
func readIdentityColumns(ctx context.Context, pool *pgxpool.Pool) (map[string][]string, error) {
	out := map[string][]string{}
	for _, t := range fillTables {
		rows, err := pool.Query(ctx, `SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass AND attidentity <> '' AND NOT attisdropped`, t.name)
		if err != nil {
			return nil, err
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		out[t.name] = cols
	}
	return out, nil
}

// compileTemplate turns captured rows into a template. Rows from index
// optional on are written only with the copy's evidence. Every uuid that
// is a captured row's key gets a fresh value per copy; refs are uuids the
// rows name that each copy is given (the call's conversation). identity
// names the identity columns, which the copies leave to their sequences.
func compileTemplate(name string, rows []capturedRow, optional int, refs []uuid.UUID, identity map[string][]string) (*template, error) {
	t := &template{name: name}
	index := map[string]int{}
	add := func(tok token) {
		if _, ok := index[tok.text]; !ok {
			index[tok.text] = len(t.tokens)
			t.tokens = append(t.tokens, tok)
		}
	}
	for _, id := range refs {
		add(token{text: id.String(), kind: tokID, version: byte(id.Version())})
	}
	var evidenceIDs []string
	for _, r := range rows {
		if r.table == "evidence" {
			evidenceIDs = append(evidenceIDs, r.key)
		}
	}
	texts := make([]string, len(rows))
	for i, r := range rows {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.json, &m); err != nil {
			return nil, fmt.Errorf("template %s: %s row: %w", name, r.table, err)
		}
		for _, col := range identity[r.table] {
			delete(m, col)
		}
		if r.table == "proposals" {
			// A call's transcript position, drawn by default from the
			// messages' sequence like theirs (migration 37).
			delete(m, "line_id")
		}
		switch r.table {
		case "evidence":
			// Evidence ids are named in the audit row that records them,
			// so the copies take theirs from the sequence themselves.
			m["id"] = json.RawMessage(strconv.Quote(evidenceIDToken + r.key))
			add(token{text: strconv.Quote(evidenceIDToken + r.key), kind: tokEvidenceID})
		case "audit_events":
			if err := replaceEvidenceID(m, evidenceIDs); err != nil {
				return nil, fmt.Errorf("template %s: %w", name, err)
			}
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		texts[i] = string(b)
		if id, err := uuid.Parse(r.key); err == nil {
			add(token{text: id.String(), kind: tokID, version: byte(id.Version())})
		}
		var created string
		if json.Unmarshal(m["created_at"], &created) == nil {
			if at, err := time.Parse(time.RFC3339Nano, created); err == nil && (t.at.IsZero() || at.Before(t.at)) {
				t.at = at
			}
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		for _, s := range jsonStrings(v) {
			if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
				add(token{text: strconv.Quote(s), kind: tokTime, at: at})
			}
		}
	}
	for _, tok := range []token{{text: templateKey, kind: tokKey}, {text: templateRationale, kind: tokRationale}, {text: templateTitle, kind: tokTitle}} {
		for _, s := range texts {
			if strings.Contains(s, tok.text) {
				add(tok)
				break
			}
		}
	}
	if t.at.IsZero() {
		return nil, fmt.Errorf("template %s: no row says when it was created", name)
	}
	required := make([]bool, len(t.tokens))
	for i, r := range rows {
		parts, slots := cut(texts[i], t.tokens)
		t.rows = append(t.rows, templateRow{table: r.table, parts: parts, slots: slots, optional: i >= optional})
		for _, tok := range slots {
			required[tok] = required[tok] || i < optional
		}
	}
	for i := range t.tokens {
		t.tokens[i].optional = !required[i]
	}
	return t, nil
}

// replaceEvidenceID puts the evidence id token where an audit row's data
// names one of the template's evidence rows.
func replaceEvidenceID(m map[string]json.RawMessage, ids []string) error {
	raw, ok := m["data"]
	if !ok || len(ids) == 0 {
		return nil
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil // not an object: nothing to name
	}
	if id, ok := data["evidence_id"]; ok && slices.Contains(ids, string(id)) {
		data["evidence_id"] = json.RawMessage(strconv.Quote(evidenceIDToken + string(id)))
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		m["data"] = b
	}
	return nil
}

// jsonStrings is every string value in v, at any depth.
func jsonStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, jsonStrings(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return nil
}

// cut splits s at every occurrence of the tokens (leftmost first, the
// longest where two start at one place).
func cut(s string, tokens []token) (parts []string, slots []int) {
	type hit struct{ at, n, tok int }
	var hits []hit
	for i, tok := range tokens {
		for from := 0; ; {
			j := strings.Index(s[from:], tok.text)
			if j < 0 {
				break
			}
			hits = append(hits, hit{from + j, len(tok.text), i})
			from += j + len(tok.text)
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return b.n - a.n
	})
	last := 0
	for _, h := range hits {
		if h.at < last {
			continue // inside a longer token
		}
		parts = append(parts, s[last:h.at])
		slots = append(slots, h.tok)
		last = h.at + h.n
	}
	return append(parts, s[last:]), slots
}
