package trust_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/trust"
)

// str is s as a JSON string literal.
func str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestEditLabel_AtItsBoundaries(t *testing.T) {
	t.Parallel()
	thousand := strings.Repeat("a", 1000)
	changed := func(n int) string { return strings.Repeat("b", n) + thousand[n:] } // the first n of 1000 characters changed
	cases := []struct {
		name          string
		before, after string
		distance      float64
		label         trust.Label
	}{
		{"unchanged", `{"to": "ana@example.com", "n": 3}`, `{"to": "ana@example.com", "n": 3}`, 0, trust.LabelApproved},
		{"key order and spacing never count", `{"a": 1, "b": {"c": [1, 2], "d": "x"}}`, "{\n  \"b\": {\"d\":\"x\",\"c\":[1,2]},\"a\":1}", 0, trust.LabelApproved},
		{"the same number written otherwise", `{"n": 1, "m": 2.50, "k": -0}`, `{"n": 1.0, "m": 25e-1, "k": 0}`, 0, trust.LabelApproved},
		{"exactly 0.20: one leaf of five", `{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}`, `{"a": 1, "b": 2, "c": 3, "d": 4, "e": 6}`, 0.20, trust.LabelMinorEdit},
		{"exactly 0.20: a fifth of a string", `{"s": "abcde"}`, `{"s": "abcdX"}`, 0.20, trust.LabelMinorEdit},
		{"exactly 0.20 from shares that do not add up in floating point", // 0.1 + 0.2 + 0.3 over 3 leaves
			`{"a": "` + thousand[:10] + `", "b": "` + thousand[:10] + `", "c": "` + thousand[:10] + `"}`,
			`{"a": "b` + thousand[:9] + `", "b": "bb` + thousand[:8] + `", "c": "bbb` + thousand[:7] + `"}`, 0.20, trust.LabelMinorEdit},
		{"just above 0.20", `{"s": ` + str(thousand) + `}`, `{"s": ` + str(changed(201)) + `}`, 0.201, trust.LabelEdited},
		{"exactly 0.50: one leaf of two", `{"a": 1, "b": 2}`, `{"a": 1, "b": 3}`, 0.50, trust.LabelEdited},
		{"exactly 0.50: half a string", `{"s": ` + str(thousand) + `}`, `{"s": ` + str(changed(500)) + `}`, 0.50, trust.LabelEdited},
		{"just above 0.50", `{"s": ` + str(thousand) + `}`, `{"s": ` + str(changed(501)) + `}`, 0.501, trust.LabelHeavyRewrite},
		{"everything replaced", `{"to": "ana@example.com"}`, `{"url": "https://example.net"}`, 1, trust.LabelHeavyRewrite},
		{"a key added", `{"a": 1}`, `{"a": 1, "b": 2}`, 0.50, trust.LabelEdited},
		{"a key removed", `{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}`, `{"a": 1, "b": 2, "c": 3, "d": 4}`, 0.20, trust.LabelMinorEdit},
		{"an element appended", `{"to": ["a", "b", "c"]}`, `{"to": ["a", "b", "c", "d"]}`, 0.25, trust.LabelEdited},
		{"a number became a string", `{"n": 1}`, `{"n": "1"}`, 1, trust.LabelHeavyRewrite},
		{"null became false", `{"n": null, "m": 1}`, `{"n": false, "m": 1}`, 0.5, trust.LabelEdited},
		{"an empty object became an empty array", `{"v": {}, "w": 1}`, `{"v": [], "w": 1}`, 0.5, trust.LabelEdited},
		{"an array became an object with the same keys", `{"v": ["x"]}`, `{"v": {"0": "x"}}`, 1, trust.LabelHeavyRewrite},
		{"a key with a slash is not a path", `{"a/b": 1}`, `{"a": {"b": 1}}`, 1, trust.LabelHeavyRewrite},
		{"a large integer changed in its last digit", `{"id": 12345678901234567}`, `{"id": 12345678901234568}`, 1, trust.LabelHeavyRewrite},
		{"characters, not bytes", `{"s": "héllo"}`, `{"s": "hallo"}`, 0.20, trust.LabelMinorEdit},
		{"scalar documents", `"abcde"`, `"abcdX"`, 0.20, trust.LabelMinorEdit},
		{"non-JSON, byte for byte the same", `not json`, `not json`, 0, trust.LabelApproved},
		{"non-JSON on one side", `not json`, `{}`, 1, trust.LabelHeavyRewrite},
		{"non-JSON on both sides, different", `not json`, `not JSON`, 1, trust.LabelHeavyRewrite},
		{"trailing garbage is not JSON", `{"a": 1}`, `{"a": 1} x`, 1, trust.LabelHeavyRewrite},
		{"nothing on both sides", ``, ``, 0, trust.LabelApproved},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			label, d := trust.EditLabel(json.RawMessage(c.before), json.RawMessage(c.after))
			if d != c.distance || label != c.label {
				t.Fatalf("distance %.17g label %s, want %.17g %s", d, label, c.distance, c.label)
			}
			if back := trust.EditDistance(json.RawMessage(c.after), json.RawMessage(c.before)); back != d {
				t.Fatalf("not symmetric: %.17g one way, %.17g the other", d, back)
			}
		})
	}
}

func TestEditDistance_StaysWithinZeroAndOne(t *testing.T) {
	t.Parallel()
	docs := []string{`{}`, `[]`, `null`, `0`, `""`, `{"a": [1, {"b": "x"}]}`, `{"a": []}`, `[[[]]]`, `{"a": {"b": {"c": "déjà vu"}}}`, `"x"`, `{"~": 1, "/": 2}`}
	for _, a := range docs {
		for _, b := range docs {
			d := trust.EditDistance(json.RawMessage(a), json.RawMessage(b))
			if d < 0 || d > 1 || (a == b) != (d == 0) {
				t.Errorf("%s → %s: %g", a, b, d)
			}
		}
	}
}

// FuzzEditDistance: any two documents are from 0 to 1 apart, the same
// distance both ways, and 0 from themselves.
func FuzzEditDistance(f *testing.F) {
	f.Add([]byte(`{"to": "ana@example.com", "n": 1}`), []byte(`{"n": 1.0, "to": "ana@example.org"}`))
	f.Add([]byte(`{"v": ["x"]}`), []byte(`{"v": {"0": "x"}}`))
	f.Add([]byte(`{"id": 12345678901234567}`), []byte(`{"id": 1.2345678901234568e16}`))
	f.Add([]byte(`not json`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		d := trust.EditDistance(a, b)
		if d < 0 || d > 1 {
			t.Fatalf("distance %g", d)
		}
		if back := trust.EditDistance(b, a); back != d {
			t.Fatalf("%g one way, %g the other", d, back)
		}
		if self := trust.EditDistance(a, a); self != 0 {
			t.Fatalf("%q is %g from itself", a, self)
		}
	})
}
