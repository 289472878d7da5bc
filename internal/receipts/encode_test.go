package receipts_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/receipts"
)

// A receipt's stored content and metadata, written directly instead of by
// encoding/json, hold the same members with the same values, so they
// canonicalise (and hash) exactly as json.Marshal's did: for every field
// set or empty, strings that need escapes (quotes, backslashes, control
// characters, HTML, U+2028) or are not UTF-8, and a content with a change
// (which still goes through encoding/json).
func TestPrepare_WritesWhatJSONMarshalWrites(t *testing.T) {
	t.Parallel()
	full := typicalContent(7)
	full.ArgumentsBefore = json.RawMessage(`{"to":["ana@example.com"],"n":[1,2.5,-0.0,{"x":null,"y":true}]}`)
	full.Reason = "line one\nline two\t\"quoted\" back\\slash \x01 <b>&amp;</b> \u2028 é 😀"
	full.Rationale = "not UTF-8: \xff\xfe and a cut rune \xe2\x82 end"
	full.Actor.Role = ""
	cases := map[string]receipts.Content{
		"typical":          typicalContent(1),
		"every field":      full,
		"the fewest":       {Kind: receipts.KindRefusal, Actor: receipts.Actor{Kind: "system"}},
		"agent, no tool":   {Kind: receipts.KindExecution, Outcome: "auto", ProposalID: uuid.NewString(), Actor: receipts.Actor{Kind: "agent", TokenID: uuid.NewString()}, Arguments: json.RawMessage(`{}`)},
		"with a change":    {Kind: receipts.KindSettingChange, Outcome: "changed", Actor: receipts.Actor{Kind: "user", UserID: uuid.NewString()}, Change: map[string]any{"from": "approve", "to": "auto <&>"}},
		"unicode in names": {Kind: receipts.KindExecution, Tool: "outil.écrire", ActionClass: "tool.call.local", Actor: receipts.Actor{Kind: "user"}, Rationale: "\u001f unit separator and \u007f del"},
	}
	ws := uuid.New()
	now := time.Date(2026, 11, 28, 10, 41, 2, 123456789, time.UTC)
	for name, c := range cases {
		for _, prepare := range []func(uuid.UUID, receipts.Content, time.Time) (receipts.Prepared, error){receipts.PrepareUnhashed, receipts.PrepareFresh} {
			p, err := prepare(ws, c, now)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// What json.Marshal writes for the same content, ids and time.
			want := c
			want.ReceiptID, want.WorkspaceID, want.Time = p.ID.String(), ws.String(), now.Format(time.RFC3339Nano)
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, name+": content", p.Content, wantJSON)
			wantMeta, err := json.Marshal(receipts.Metadata{WorkspaceID: want.WorkspaceID, Kind: c.Kind, ProposalID: c.ProposalID, ActionClass: c.ActionClass, Time: want.Time})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, name+": metadata", p.Metadata, wantMeta)
			gotHash, err := receipts.ContentHash(json.RawMessage(p.Content))
			if err != nil {
				t.Fatalf("%s: the stored content does not hash: %v", name, err)
			}
			wantHash, err := receipts.ContentHash(json.RawMessage(wantJSON))
			if err != nil {
				t.Fatal(err)
			}
			if string(gotHash) != string(wantHash) {
				t.Errorf("%s: content hash %x, json.Marshal's %x", name, gotHash, wantHash)
			}
		}
	}
}

// sameJSON fails unless got is JSON with exactly want's members and values
// (in any order and spelling).
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}
