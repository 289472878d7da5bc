package strictjson

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type toolRequest struct {
	Tool      string `json:"tool"`
	Arguments struct {
		Collection string         `json:"collection"`
		Key        string         `json:"key"`
		Value      map[string]any `json:"value"`
		Limit      int            `json:"limit"`
		Count      uint           `json:"count"`
		Raw        []byte         `json:"raw"`
		At         time.Time      `json:"at"`
	} `json:"arguments"`
	Rationale string `json:"rationale"`
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name            string
		in              string
		disallowUnknown bool
		wantPath        string
		wantReason      string // substring; "" when it decodes
	}{
		{"tool call", `{"tool":"records.put","arguments":{"collection":"c","key":"k","value":{}},"rationale":"because it is needed"}`, true, "", ""},
		{"unknown field allowed", `{"tool":"t","extra":1}`, false, "", ""},
		{"unknown field refused", `{"tool":"t","extra":1}`, true, "", `unknown field "extra"`},
		{"unknown nested field refused", `{"arguments":{"colection":"c"}}`, true, "", `unknown field "colection"`},
		{"check runs first", `{"tool":"a\u0000"}`, true, "tool", "NUL"},
		{"duplicate key refused before decoding", `{"tool":"a","tool":"b"}`, false, "tool", "duplicate key"},
		{"string for object", `{"arguments":"x"}`, false, "arguments", "want object, got string"},
		{"number for string", `{"tool":1}`, false, "tool", "want string, got number"},
		{"fraction for integer", `{"arguments":{"limit":1.5}}`, false, "arguments.limit", "want integer, got number 1.5"},
		{"overflow for integer", `{"arguments":{"limit":1e30}}`, false, "arguments.limit", "want integer, got number 1e30"},
		{"negative for unsigned", `{"arguments":{"count":-1}}`, false, "arguments.count", "want non-negative integer, got number -1"},
		{"number for bytes", `{"arguments":{"raw":1}}`, false, "arguments.raw", "want base64 string"},
		{"number for time", `{"arguments":{"at":1}}`, false, "", "not acceptable"},
		{"bad time", `{"arguments":{"at":"yesterday"}}`, false, "", "not acceptable"},
		{"bad base64", `{"arguments":{"raw":"!!"}}`, false, "", "not acceptable"},
		{"array for struct", `[]`, false, "", "want object, got array"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var req toolRequest
			err := Decode([]byte(c.in), &req, Limits{}, c.disallowUnknown)
			if c.wantReason == "" {
				if err != nil {
					t.Fatalf("Decode(%s) = %v", c.in, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%s) = %v, want *Error", c.in, err)
			}
			if e.Path != c.wantPath || !strings.Contains(e.Reason, c.wantReason) {
				t.Errorf("Decode(%s) = {Path %q, Reason %q}, want {%q, ...%q...}", c.in, e.Path, e.Reason, c.wantPath, c.wantReason)
			}
			if strings.Contains(e.Reason, "Go ") || strings.Contains(e.Reason, "toolRequest") {
				t.Errorf("Reason %q names Go types", e.Reason)
			}
		})
	}
}

func TestDecode_Values(t *testing.T) {
	var req toolRequest
	in := `{"tool":"records.put","arguments":{"collection":"c\ud83d\ude00","key":"k","value":{"n":-0}}}`
	if err := Decode([]byte(in), &req, Limits{}, true); err != nil {
		t.Fatal(err)
	}
	if req.Tool != "records.put" || req.Arguments.Collection != "c😀" || req.Arguments.Value["n"] != -0.0 {
		t.Errorf("decoded %+v", req)
	}
}

func TestDecode_InvalidTargetIsAProgrammingError(t *testing.T) {
	var req toolRequest
	err := Decode([]byte(`{}`), req, Limits{}, false)
	var e *Error
	if err == nil || errors.As(err, &e) {
		t.Errorf("Decode into a non-pointer = %v, want a plain error", err)
	}
}

// TestFuzzSeeds_AreTheHostileCases keeps the committed corpus meaningful: each
// seed is refused for its own reason, or accepted.
func TestFuzzSeeds_AreTheHostileCases(t *testing.T) {
	want := map[string]string{
		"nul_escape":             "NUL",
		"raw_nul":                "NUL",
		"lone_high":              "lone high surrogate",
		"lone_low":               "lone low surrogate",
		"reversed_pair":          "lone low surrogate",
		"valid_pair":             "",
		"invalid_utf8":           "invalid UTF-8",
		"invalid_utf8_outside":   "invalid UTF-8",
		"big_exponent":           "too large",
		"long_number":            "longer than",
		"duplicate_keys":         `duplicate key "tool"`,
		"duplicate_keys_escaped": `duplicate key "a"`,
		"deep_nesting":           "deeper than",
		"trailing_garbage":       "only whitespace may follow",
		"tool_call":              "",
		"empty":                  "empty",
		"raw_control":            "raw control character",
		"bad_escape":             "invalid escape",
	}
	files, err := filepath.Glob("testdata/fuzz/FuzzCheck/*")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, file := range files {
		name := filepath.Base(file)
		reason, known := want[name]
		if !known {
			continue // a crasher the fuzzer found: TestCheck holds its case
		}
		found[name] = true
		data := readSeed(t, file)
		err := Check(data, Limits{})
		switch {
		case reason == "" && err != nil:
			t.Errorf("%s: Check(%q) = %v, want nil", name, data, err)
		case reason != "" && (err == nil || !strings.Contains(err.(*Error).Reason, reason)):
			t.Errorf("%s: Check(%q) = %v, want %q", name, data, err, reason)
		}
	}
	for name := range want {
		if !found[name] {
			t.Errorf("seed %s is missing", name)
		}
	}
}

// readSeed reads a one-value corpus file in Go's fuzz format.
func readSeed(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	header, rest, _ := strings.Cut(string(b), "\n")
	lit, ok := strings.CutPrefix(strings.TrimSpace(rest), "[]byte(")
	if header != "go test fuzz v1" || !ok {
		t.Fatalf("%s is not a []byte corpus file", file)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return []byte(s)
}
