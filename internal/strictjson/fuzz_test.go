package strictjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// strictReasons are the refusals of documents encoding/json finds valid:
// everything else Check refuses, json.Valid must refuse too.
var strictReasons = []string{
	"NUL character",
	"invalid UTF-8",
	"lone high surrogate",
	"lone low surrogate",
	"duplicate key",
	"nesting is deeper than",
	"number is longer than",
	"number is too large",
}

// FuzzCheck holds Check to the properties its callers rely on. The seed
// corpus in testdata/fuzz/FuzzCheck has one file per hostile case.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(toolCall))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, Limits{})
		if err == nil {
			if !json.Valid(data) {
				t.Fatalf("Check accepted %q, which json.Valid refuses", data)
			}
			if !utf8.Valid(data) {
				t.Fatalf("Check accepted invalid UTF-8 %q", data)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("Check accepted %q, which encoding/json cannot decode: %v", data, err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encoding %q: %v", data, err)
			}
			if err := Check(again, Limits{}); err != nil {
				t.Fatalf("Check accepted %q but refuses its re-encoding %q: %v", data, again, err)
			}
			var w any
			if err := Decode(data, &w, Limits{}, false); err != nil {
				t.Fatalf("Decode(%q) = %v after Check accepted it", data, err)
			}
			return
		}
		e, ok := err.(*Error)
		if !ok {
			t.Fatalf("Check(%q) returned %T, want *Error", data, err)
		}
		if e.Offset < 0 || e.Offset > len(data) {
			t.Fatalf("Check(%q): offset %d outside the document", data, e.Offset)
		}
		if e.Reason == "" || !utf8.ValidString(e.Reason) || !utf8.ValidString(e.Error()) {
			t.Fatalf("Check(%q): reason %q is empty or not valid UTF-8", data, e.Reason)
		}
		if json.Valid(data) && !containsAny(e.Reason, strictReasons) {
			t.Fatalf("Check(%q) = %v, a syntax error, but json.Valid accepts it", data, err)
		}
		if err2 := Check(bytes.Clone(data), Limits{}); err2 == nil || *err2.(*Error) != *e {
			t.Fatalf("Check(%q) is not deterministic: %v then %v", data, err, err2)
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
