package strictjson

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// toolCall is a typical tool-call body: about 300 bytes.
const toolCall = `{"tool":"records.put","arguments":{"collection":"customers","key":"cus_8f3a2b","value":{"name":"Ada Lovelace","email":"ada@example.com","tags":["vip","eu"],"balance":-1250.75,"active":true,"notes":null}},"rationale":"The customer asked to update their e-mail address; the ticket is #4821."}`

func nested(depth int, leaf string) string {
	return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat(`}`, depth)
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name       string
		in         string
		l          Limits
		wantPath   string
		wantReason string // substring; "" when the document is accepted
		wantOffset int    // checked when wantReason is set and wantOffset >= 0
	}{
		// Accepted.
		{name: "tool call", in: toolCall},
		{name: "object", in: `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`},
		{name: "empty object", in: `{}`},
		{name: "empty array", in: `[]`},
		{name: "empty object with spaces", in: " { \t\r\n } "},
		{name: "empty array with spaces", in: "[ \n ]"},
		{name: "top-level string", in: `"x"`},
		{name: "top-level number", in: `42`},
		{name: "top-level true", in: `true`},
		{name: "top-level false", in: `false`},
		{name: "top-level null", in: `null`},
		{name: "surrounding whitespace", in: "\r\n\t {\"a\":1} \n"},
		{name: "escaped surrogate pair", in: `{"emoji":"\ud83d\ude00"}`},
		{name: "escaped surrogate pair upper case", in: `"\uD83D\uDE00"`},
		{name: "escaped surrogate pair in key", in: `{"\ud83d\ude00":1}`},
		{name: "raw multibyte UTF-8", in: `{"text":"héllo wörld — 日本語 😀"}`},
		{name: "unicode keys", in: `{"ключ":1,"鍵":2,"🔑":3}`},
		{name: "every simple escape", in: `"\" \\ \/ \b \f \n \r \t"`},
		{name: "escaped control characters", in: `"\u0001\u001f\u007f"`},
		{name: "escaped BMP characters", in: `"\u00e9\u65e5\uFFFF\uE000\uD7FF"`},
		{name: "raw DEL", in: "\"\x7f\""},
		{name: "raw U+2028", in: "\"\u2028\""},
		{name: "depth 32 is allowed", in: nested(32, `1`)},
		{name: "depth 32 arrays", in: strings.Repeat("[", 32) + strings.Repeat("]", 32)},
		{name: "depth 3 with limit 3", in: `[[[]]]`, l: Limits{MaxDepth: 3}},
		{name: "zero", in: `0`},
		{name: "minus zero", in: `-0`},
		{name: "minus zero float", in: `-0.0`},
		{name: "1e308", in: `1e308`},
		{name: "max float64", in: `1.7976931348623157e308`},
		{name: "-1e308", in: `-1e308`},
		{name: "small fraction", in: `0.000001`},
		{name: "exponent forms", in: `[1E5,1e+5,1e-5,1.5E-05,0e0,-0.5e+10]`},
		{name: "underflow to zero", in: `1e-400`},
		{name: "64-character number", in: strings.Repeat("1", 64)},
		{name: "distinct keys in distinct objects", in: `{"a":{"a":1},"b":{"a":2}}`},
		{name: "same key in sibling objects", in: `[{"a":1},{"a":2}]`},
		{name: "keys that differ by case", in: `{"a":1,"A":2}`},
		{name: "empty key", in: `{"":1}`},
		{name: "many distinct keys", in: manyKeys(100, false)},

		// Invalid UTF-8.
		{"invalid UTF-8 in string", "{\"a\":\"\xff\"}", Limits{}, "a", "invalid UTF-8", 6},
		{"invalid UTF-8 in key", "{\"\xff\":1}", Limits{}, "", "key contains invalid UTF-8", 2},
		{"invalid UTF-8 outside strings", "{\"a\":1}\xff", Limits{}, "", "invalid UTF-8", 7},
		{"invalid UTF-8 as a value", "[\xc3]", Limits{}, "0", "invalid UTF-8", 1},
		{"truncated UTF-8 sequence", "\"\xe6\x97\"", Limits{}, "", "invalid UTF-8", 1},
		{"overlong encoding", "\"\xc0\xaf\"", Limits{}, "", "invalid UTF-8", 1},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", Limits{}, "", "invalid UTF-8", 1},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", Limits{}, "", "invalid UTF-8", 1},
		{"byte order mark", "\ufeff{}", Limits{}, "", "expected a value; found U+FEFF", 0},

		// NUL.
		{"NUL escape in value", `{"a":"x\u0000y"}`, Limits{}, "a", "contains a NUL character", 7},
		{"NUL escape in key", `{"a\u0000":1}`, Limits{}, "", "key contains a NUL character", 3},
		{"raw NUL in value", "{\"a\":\"x\x00\"}", Limits{}, "a", "string contains a NUL character", 7},
		{"raw NUL in key", "{\"\x00\":1}", Limits{}, "", "key contains a NUL character", 2},
		{"raw NUL outside strings", "{\"a\":1}\x00", Limits{}, "", "found a NUL character", 7},
		{"NUL escape nested", `{"arguments":{"keys":["a","b","c","\u0000"]}}`, Limits{}, "arguments.keys.3", "NUL", 35},

		// Surrogates.
		{"lone high surrogate", `{"a":"\ud800"}`, Limits{}, "a", `lone high surrogate \uD800`, 6},
		{"lone high surrogate then text", `{"a":"\udbffx"}`, Limits{}, "a", "lone high surrogate", 6},
		{"high surrogate then high", `"\ud800\ud800"`, Limits{}, "", "lone high surrogate", 1},
		{"high surrogate then BMP escape", `"\ud800\u0041"`, Limits{}, "", "lone high surrogate", 1},
		{"high surrogate then simple escape", `"\ud800\n"`, Limits{}, "", "lone high surrogate", 1},
		{"high surrogate at end of input", `"\ud800`, Limits{}, "", "lone high surrogate", 1},
		{"high surrogate then bad hex", `"\ud800\udcxx"`, Limits{}, "", "lone high surrogate", 1},
		{"lone low surrogate", `{"a":"\udc00"}`, Limits{}, "a", `lone low surrogate \uDC00`, 6},
		{"lone low surrogate last", `"x\udfff"`, Limits{}, "", "lone low surrogate", 2},
		{"reversed pair", `["\ude00\ud83d"]`, Limits{}, "0", "lone low surrogate", 2},
		{"lone surrogate in key", `{"\ud800":1}`, Limits{}, "", "key contains a lone high surrogate", 2},
		{"pair then lone low", `"\ud83d\ude00\ude00"`, Limits{}, "", "lone low surrogate", 13},

		// Control characters and escapes.
		{"raw newline in string", "\"a\nb\"", Limits{}, "", "raw control character U+000A", 2},
		{"raw tab in key", "{\"a\tb\":1}", Limits{}, "", "key contains a raw control character U+0009", 3},
		{"raw 0x1f", "\"\x1f\"", Limits{}, "", "U+001F", 1},
		{"bad escape letter", `"\x41"`, Limits{}, "", `invalid escape "\\x"`, 1},
		{"bad escape apostrophe", `"\'"`, Limits{}, "", "invalid escape", 1},
		{"bad escape of invalid UTF-8", "\"\\\xff\"", Limits{}, "", `invalid escape "\\\xff"`, 1},
		{"short unicode escape", `"\u12"`, Limits{}, "", "four hex digits", 1},
		{"non-hex unicode escape", `"\u12g4"`, Limits{}, "", "four hex digits", 1},
		{"upper-case U escape", `"\U0041"`, Limits{}, "", "invalid escape", 1},
		{"backslash at end of input", `"\`, Limits{}, "", "string is not closed", 2},
		{"unterminated string", `{"a":"abc`, Limits{}, "a", "string is not closed", 9},
		{"unterminated key", `{"abc`, Limits{}, "", "key is not closed", 5},

		// Numbers.
		{"leading zero", `01`, Limits{}, "", "leading zero", 1},
		{"minus leading zero", `-01`, Limits{}, "", "leading zero", 2},
		{"plus sign", `+1`, Limits{}, "", "expected a value; found '+'", 0},
		{"lone minus", `[-]`, Limits{}, "0", "digit must follow '-'", 2},
		{"minus at end", `-`, Limits{}, "", "digit must follow '-'", 1},
		{"leading dot", `.5`, Limits{}, "", "expected a value; found '.'", 0},
		{"trailing dot", `1.`, Limits{}, "", "digit must follow '.'", 2},
		{"dot then exponent", `1.e5`, Limits{}, "", "digit must follow '.'", 2},
		{"bare exponent", `1e`, Limits{}, "", "digit must follow the exponent", 2},
		{"exponent sign only", `1e+`, Limits{}, "", "digit must follow the exponent", 3},
		{"hex number", `0x10`, Limits{}, "", "only whitespace may follow the value; found 'x'", 1},
		{"NaN", `NaN`, Limits{}, "", "expected a value; found 'N'", 0},
		{"Infinity", `-Infinity`, Limits{}, "", "digit must follow '-'", 1},
		{"1e400", `{"n":1e400}`, Limits{}, "n", "too large for a 64-bit float", 5},
		{"-1e400", `[-1e400]`, Limits{}, "0", "too large", 1},
		{"just beyond max float64", `1.8e308`, Limits{}, "", "too large", 0},
		{"huge exponent", `1e99999999999999999999`, Limits{}, "", "too large", 0},
		{"65-character number", strings.Repeat("1", 65), Limits{}, "", "longer than 64 characters", 0},
		{"400-digit number", `{"n":` + strings.Repeat("9", 400) + `}`, Limits{}, "n", "longer than 64 characters", 5},
		{"long number under custom limit", `12345`, Limits{MaxNumberLen: 4}, "", "longer than 4 characters", 0},
		{"long fraction", `0.` + strings.Repeat("0", 70) + `1`, Limits{}, "", "longer than 64", 0},

		// Duplicate keys.
		{"duplicate key", `{"tool":"a","tool":"b"}`, Limits{}, "tool", `duplicate key "tool"`, 12},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, Limits{}, "a", `duplicate key "a"`, 7},
		{"duplicate key via surrogate pair", `{"😀":1,"\ud83d\ude00":2}`, Limits{}, "😀", `duplicate key "😀"`, 10},
		{"duplicate key via escaped slash", `{"a/b":1,"a\/b":2}`, Limits{}, "a/b", `duplicate key "a/b"`, 9},
		{"duplicate empty key", `{"":1,"":2}`, Limits{}, "", `duplicate key ""`, 6},
		{"duplicate key nested", `{"arguments":{"k":1,"x":2,"k":3}}`, Limits{}, "arguments.k", `duplicate key "k"`, 26},
		{"duplicate key after nested object", `{"a":{"b":1},"a":2}`, Limits{}, "a", `duplicate key "a"`, 13},
		{"duplicate key among many", manyKeys(100, true), Limits{}, "k0", `duplicate key "k0"`, -1},
		{"duplicate long key is cut", `{"` + strings.Repeat("é", 40) + `":1,"` + strings.Repeat("é", 40) + `":2}`, Limits{}, strings.Repeat("é", 40), `duplicate key "` + strings.Repeat("é", 32) + `"…`, -1},

		// Depth.
		{"depth 33 objects", nested(33, `1`), Limits{}, strings.TrimSuffix(strings.Repeat("a.", 32), "."), "nesting is deeper than 32 levels", 160},
		{"depth 33 arrays", strings.Repeat("[", 33) + strings.Repeat("]", 33), Limits{}, strings.TrimSuffix(strings.Repeat("0.", 32), "."), "deeper than 32", 32},
		{"depth 100", strings.Repeat("[", 100) + strings.Repeat("]", 100), Limits{}, strings.TrimSuffix(strings.Repeat("0.", 32), "."), "deeper than 32", 32},
		{"depth 4 with limit 3", `[[[[]]]]`, Limits{MaxDepth: 3}, "0.0.0", "deeper than 3 levels", 3},

		// Structure.
		{"empty body", ``, Limits{}, "", "the body is empty", 0},
		{"whitespace body", " \n\t", Limits{}, "", "the body is empty", 3},
		{"trailing garbage", `{"a":1}x`, Limits{}, "", "only whitespace may follow the value; found 'x'", 7},
		{"two values", `{} {}`, Limits{}, "", "only whitespace may follow", 3},
		{"trailing comma in object", `{"a":1,}`, Limits{}, "", "expected a string key; found '}'", 7},
		{"trailing comma in array", `[1,]`, Limits{}, "1", "expected a value; found ']'", 3},
		{"leading comma in array", `[,1]`, Limits{}, "0", "expected a value; found ','", 1},
		{"missing comma in object", `{"a":1 "b":2}`, Limits{}, "", "expected ',' or '}' after an object member", 7},
		{"missing comma in array", `[1 2]`, Limits{}, "", "expected ',' or ']' after an array element", 3},
		{"missing colon", `{"a" 1}`, Limits{}, "a", "expected ':' after the key", 5},
		{"missing value", `{"a":}`, Limits{}, "a", "expected a value; found '}'", 5},
		{"unquoted key", `{a:1}`, Limits{}, "", "expected a string key; found 'a'", 1},
		{"single-quoted string", `{'a':1}`, Limits{}, "", "expected a string key", 1},
		{"number key", `{1:1}`, Limits{}, "", "expected a string key", 1},
		{"mismatched close", `[1}`, Limits{}, "", "expected ',' or ']'", 2},
		{"stray close", `]`, Limits{}, "", "expected a value; found ']'", 0},
		{"unclosed object", `{"a":1`, Limits{}, "", "object is not closed", 6},
		{"unclosed array", `[1,2`, Limits{}, "", "array is not closed", 4},
		{"unclosed after key", `{"a"`, Limits{}, "a", "':' is missing", 4},
		{"unclosed after colon", `{"a":`, Limits{}, "a", "a value is missing", 5},
		{"unclosed after comma", `{"a":1,`, Limits{}, "", "object is not closed", 7},
		{"bad literal", `tru`, Limits{}, "", "unexpected end of input in true", 3},
		{"misspelled literal", `[nul1]`, Limits{}, "0", "expected null", 1},
		{"capitalised literal", `True`, Limits{}, "", "found 'T'", 0},
		{"literal with suffix", `truex`, Limits{}, "", "only whitespace may follow", 4},
		{"comment", `{} // hi`, Limits{}, "", "only whitespace may follow", 3},
		{"vertical tab is not whitespace", "\v{}", Limits{}, "", "control character U+000B", 0},
		{"non-breaking space is not whitespace", "\u00a0{}", Limits{}, "", "found U+00A0", 0},
		{"path through arrays and objects", `{"a":[{"b":[0,1,{"c":"\ud800"}]}]}`, Limits{}, "a.0.b.2.c", "lone high surrogate", 22},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases named %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			err := Check([]byte(c.in), c.l)
			if c.wantReason == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", c.in, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%q) = %v, want *Error", c.in, err)
			}
			if e.Path != c.wantPath {
				t.Errorf("Path = %q, want %q (%v)", e.Path, c.wantPath, e)
			}
			if !strings.Contains(e.Reason, c.wantReason) {
				t.Errorf("Reason = %q, want it to contain %q", e.Reason, c.wantReason)
			}
			if c.wantOffset >= 0 && e.Offset != c.wantOffset {
				t.Errorf("Offset = %d, want %d (%v)", e.Offset, c.wantOffset, e)
			}
			if !utf8.ValidString(e.Reason) {
				t.Errorf("Reason %q is not valid UTF-8", e.Reason)
			}
		})
	}
}

// manyKeys is an object with n distinct keys, and with dup a repeat of the
// first one at the end.
func manyKeys(n int, dup bool) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + itoa(i) + `":` + itoa(i))
	}
	if dup {
		b.WriteString(`,"k0":0`)
	}
	b.WriteString("}")
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestCheck_DuplicateKeyAtEveryPosition covers the switch from pairwise
// comparison to a map inside one object.
func TestCheck_DuplicateKeyAtEveryPosition(t *testing.T) {
	const n = 3 * keysInline
	for first := range n {
		for second := first + 1; second <= n; second++ {
			var b strings.Builder
			b.WriteString("{")
			for i := range n + 1 {
				if i > 0 {
					b.WriteString(",")
				}
				k := i
				if i == second {
					k = first
				}
				b.WriteString(`"k` + itoa(k) + `":0`)
			}
			b.WriteString("}")
			err := Check([]byte(b.String()), Limits{})
			var e *Error
			if !errors.As(err, &e) || e.Path != "k"+itoa(first) || !strings.Contains(e.Reason, "duplicate key") {
				t.Fatalf("key %d repeated at %d: got %v", first, second, err)
			}
		}
	}
}

// TestCheck_KeysOfClosedObjectsAreForgotten makes sure a key stays in its
// own object: siblings and parents share names freely, after any number of
// keys (map or not).
func TestCheck_KeysOfClosedObjectsAreForgotten(t *testing.T) {
	inner := manyKeys(2*keysInline, false)
	doc := `{"k0":` + inner + `,"k1":` + inner + `,"x":[` + inner + `,` + inner + `]}`
	if err := Check([]byte(doc), Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestError_Error(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{Reason: "the body is empty"}, "strictjson: the body is empty (offset 0)"},
		{Error{Path: "arguments.keys.3", Reason: "string contains a NUL character", Offset: 35},
			`strictjson: "arguments.keys.3": string contains a NUL character (offset 35)`},
		{Error{Path: "a\nb", Reason: "x", Offset: 1}, `strictjson: "a\nb": x (offset 1)`},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

func TestLimits_ZeroAndNegativeTakeDefaults(t *testing.T) {
	for _, l := range []Limits{{}, {MaxDepth: -1, MaxNumberLen: -5}} {
		if err := Check([]byte(nested(DefaultMaxDepth, strings.Repeat("1", DefaultMaxNumberLen))), l); err != nil {
			t.Errorf("%+v: at the defaults: %v", l, err)
		}
		if Check([]byte(nested(DefaultMaxDepth+1, "1")), l) == nil {
			t.Errorf("%+v: depth %d accepted", l, DefaultMaxDepth+1)
		}
		if Check([]byte(strings.Repeat("1", DefaultMaxNumberLen+1)), l) == nil {
			t.Errorf("%+v: a %d-character number accepted", l, DefaultMaxNumberLen+1)
		}
	}
}

// TestCheck_LinearTime feeds large hostile documents; each must finish in
// one pass (a quadratic scanner would take minutes here).
func TestCheck_LinearTime(t *testing.T) {
	const n = 1 << 20
	docs := map[string]string{
		"deep arrays":      strings.Repeat("[", n),
		"many keys":        manyKeys(n/16, false),
		"long string":      `"` + strings.Repeat("é", n) + `"`,
		"long escapes":     `"` + strings.Repeat(`\ud83d\ude00`, n/12) + `"`,
		"long key":         `{"` + strings.Repeat("a", n) + `":1}`,
		"long number":      strings.Repeat("1", n),
		"many numbers":     "[" + strings.Repeat("1e308,", n/6) + "0]",
		"unclosed objects": strings.Repeat(`{"a":`, n/5),
		"long whitespace":  strings.Repeat(" ", n) + "{}",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			_ = Check([]byte(doc), Limits{MaxDepth: n, MaxNumberLen: n})
			_ = Check([]byte(doc), Limits{})
		})
	}
}

// randomValue draws a JSON-able value: nested maps and slices of strings
// with any runes (NUL among them), numbers and literals.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case k < 2 && depth < 40:
		m := map[string]any{}
		for range r.IntN(5) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	case k < 4 && depth < 40:
		s := []any{}
		for range r.IntN(5) {
			s = append(s, randomValue(r, depth+1))
		}
		return s
	case k == 4:
		return r.NormFloat64() * float64(int64(1)<<r.IntN(60))
	case k == 5:
		return r.IntN(2) == 0
	case k == 6:
		return nil
	}
	return randomString(r)
}

func randomString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		switch r.IntN(6) {
		case 0:
			b.WriteRune(rune(r.IntN(0x20))) // control, NUL included
		case 1:
			b.WriteRune(rune(r.IntN(utf8.MaxRune + 1))) // surrogates become U+FFFD
		default:
			b.WriteRune(rune('a' + r.IntN(3)))
		}
	}
	return b.String()
}

// depthOf and hasNUL say what Check must refuse in a marshalled value.
func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			d = max(d, depthOf(x))
		}
		return d + 1
	case []any:
		for _, x := range v {
			d = max(d, depthOf(x))
		}
		return d + 1
	}
	return 0
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if strings.ContainsRune(k, 0) || hasNUL(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasNUL(x) {
				return true
			}
		}
	case string:
		return strings.ContainsRune(v, 0)
	}
	return false
}

// TestCheck_AcceptsWhatEncodingJSONWrites is the property in the other
// direction from the fuzzer: whatever encoding/json marshals is accepted,
// unless it holds a NUL or nests too deep, and then the reason says so.
func TestCheck_AcceptsWhatEncodingJSONWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var accepted, nul, deep int
	for range 20000 {
		v := randomValue(r, 0)
		data := mustMarshal(v)
		err := Check(data, Limits{})
		deepV, nulV := depthOf(v) > DefaultMaxDepth, hasNUL(v)
		if !deepV && !nulV {
			accepted++
			if err != nil {
				t.Fatalf("Check(%s) = %v, want nil", data, err)
			}
			continue
		}
		deep += b2i(deepV)
		nul += b2i(nulV)
		e, _ := err.(*Error)
		if e == nil || !(deepV && strings.Contains(e.Reason, "deeper than") || nulV && strings.Contains(e.Reason, "NUL")) {
			t.Fatalf("Check(%s) = %v, want too deep (%v) or NUL (%v)", data, err, deepV, nulV)
		}
	}
	if accepted == 0 || nul == 0 || deep == 0 {
		t.Errorf("draws too narrow: %d accepted, %d with NUL, %d too deep", accepted, nul, deep)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func BenchmarkCheck_ToolCall(b *testing.B) {
	data := []byte(toolCall)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
