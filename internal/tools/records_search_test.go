package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// A query of one or two characters, too short for the trigram indexes,
// finds the records whose key starts with it (case-insensitively, in key
// order), not those that only contain it; three characters find text
// anywhere in keys and values.
func TestRecordsSearch_ShortQueryMatchesTheStartOfAKey(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "search")
	other := mustWorkspace(t, pool, "search-other")
	q := db.New(pool)
	put := func(ws uuid.UUID, collection, key, value string) {
		t.Helper()
		if _, err := q.PutRecord(context.Background(), db.PutRecordParams{WorkspaceID: ws, Collection: collection, Key: key, Value: json.RawMessage(value)}); err != nil {
			t.Fatal(err)
		}
	}
	put(ws, "clients", "acme", `{}`)
	put(ws, "clients", "ACORN", `{}`)
	put(ws, "clients", "bacon", `{}`)                  // contains "ac", does not start with it
	put(ws, "clients", "zed", `{"name": "Acme Corp"}`) // only its value does
	put(ws, "archive", "ace", `{}`)
	put(ws, "archive", "a_c_100%", `{}`)
	put(ws, "archive", "abc", `{"n": "1000"}`) // what a_c and 00% would match as LIKE patterns
	put(other, "clients", "acme-other", `{}`)
	// The index joins key and value's text with U+001F (migration 58): a
	// match spanning the two is not one; a key's own U+001F still matches.
	put(ws, "joined", "spana", `{"x": 1}`)
	put(ws, "joined", "six\x1fseven", `{}`)
	tool := mustTool(t, mustBuiltin(t), "records.search")

	for _, c := range []struct {
		name, args string
		want       []string // collection/key, in order
	}{
		{"two characters", `{"query": "ac"}`, []string{"archive/ace", "clients/acme", "clients/ACORN"}},
		{"one character, any case", `{"query": "A"}`, []string{"archive/a_c_100%", "archive/abc", "archive/ace", "clients/acme", "clients/ACORN"}},
		{"LIKE's wildcards are plain characters", `{"query": "a_c"}`, []string{"archive/a_c_100%"}},
		{"a percent sign too", `{"query": "00%"}`, []string{"archive/a_c_100%"}},
		{"two characters in one collection", `{"query": "AC", "collection": "clients"}`, []string{"clients/acme", "clients/ACORN"}},
		{"no key starts with it", `{"query": "on"}`, nil},
		{"three characters, anywhere", `{"query": "aco"}`, []string{"clients/ACORN", "clients/bacon"}},
		{"three characters, in a value", `{"query": "acme", "collection": "clients"}`, []string{"clients/acme", "clients/zed"}},
		{"not across a key and its value", `{"query": "na\u001f{\"x"}`, nil},
		{"a key's own control character", `{"query": "x\u001fs", "collection": "joined"}`, []string{"joined/six\x1fseven"}},
		{"a value's text", `{"query": "{\"x\": 1", "collection": "joined"}`, []string{"joined/spana"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := run(t, pool, tool, ws, c.args)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range res["records"].([]any) {
				r := r.(map[string]any)
				got = append(got, r["collection"].(string)+"/"+r["key"].(string))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("found %v, want %v", got, c.want)
			}
			if n := res["count"].(float64); int(n) != len(c.want) {
				t.Errorf("count %v, want %d", n, len(c.want))
			}
		})
	}
}

// An empty query, which would match every record, is refused by the
// schema with the field named (the API answers 422 before anything is
// stored); one character is a search.
func TestRecordsSearch_EmptyQueryIsRefused(t *testing.T) {
	tool := mustTool(t, mustBuiltin(t), "records.search")
	err := tool.ValidateArguments(json.RawMessage(`{"query": ""}`))
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.EINVALID {
		t.Fatalf("empty query: %v, want an invalid-arguments error", err)
	}
	if len(ae.Fields) != 1 || ae.Fields[0].Field != "arguments.query" {
		t.Errorf("fields %+v, want arguments.query alone", ae.Fields)
	}
	if err := tool.ValidateArguments(json.RawMessage(`{"query": "a"}`)); err != nil {
		t.Errorf("one character: %v, want it accepted", err)
	}
}
