package web

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/strictjson"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// FuzzArgumentsFromForm: the cell form's decoder is total. Any form body
// against any built-in tool gives either a field error or a JSON object
// that passes the strict checks every JSON body passes (so the service
// never meets what the API would refuse), never a panic or an internal
// error.
func FuzzArgumentsFromForm(f *testing.F) {
	deep := url.QueryEscape(strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40))
	for _, seed := range []string{"arg.collection=c&arg.key=k&arg.value=%7B%7D", "arg.amount=NaN&arg.currency=EUR&arg.payee=x",
		"arg.amount=1e400", "arg.amount=-Inf", "arg.keys=%5B%22a%22%5D&arg.collection=c", "arg.value=%7B%22a%22%3A", "arg.key=%00",
		"arg.key=%ff%fe", "arg.payload=%5B1%2C2%5D", "%zz", "arg.value=" + deep, "arg.value=%7B%22a%22%3A%22%5Cu0000%22%7D",
		"arg.value=%7B%22a%22%3A1%2C%22a%22%3A2%7D", "arg.value=%7B%22a%22%3A%22%5Cud800%22%7D", "arg.value=%7B%22a%22%3A1e400%7D"} {
		f.Add(seed)
	}
	r, err := tools.Builtin()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		for _, tool := range r.List() {
			args, err := argumentsFromForm(tool, form)
			if err != nil {
				if code := errCode(err); code != "invalid" {
					t.Fatalf("%s: %q gave a %q error: %v", tool.Name, body, code, err)
				}
				continue
			}
			var m map[string]any
			if json.Unmarshal(args, &m) != nil {
				t.Fatalf("%s: %q gave %s, not a JSON object", tool.Name, body, args)
			}
			if err := strictjson.Check(args, strictjson.Limits{}); err != nil {
				t.Fatalf("%s: %q gave %s, which the strict checks refuse: %v", tool.Name, body, args, err)
			}
		}
	})
}

// FuzzConstraintsFromForm: the approve form's decoder is total, and every
// constraint it lets through is well formed and of a known kind.
func FuzzConstraintsFromForm(f *testing.F) {
	for _, seed := range []string{"dry_run_only=on", "max_amount=5", "max_amount=NaN", "max_amount=1e400", "max_amount=-1",
		"recipient_allowlist=a%40b.co%2C+%40c.co", "domain_allowlist=%2C%2C", "expires_at=2030-01-01T10%3A00", "expires_at=yesterday",
		"redaction_rules=a.b", "redaction_rules=..", "spend_limit=3", "_csrf=x&requires_witness=1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		cs, err := constraintsFromForm(form)
		if err != nil {
			if errCode(err) != "invalid" {
				t.Fatalf("%q gave %v", body, err)
			}
			return
		}
		for _, c := range cs {
			if c.Validate() != nil || !slices.Contains(policy.ConstraintKinds, c.Kind) {
				t.Fatalf("%q let through %+v", body, c)
			}
		}
	})
}

// FuzzConstraintsFromJSON: the same for the approve endpoint's JSON.
func FuzzConstraintsFromJSON(f *testing.F) {
	for _, seed := range []string{`{"constraints":[{"kind":"dry_run_only"}]}`, `{"constraints":[{"kind":"max_amount","amount":1e400}]}`,
		`{"constraints":[{"kind":"spend_limit"}]}`, `{"constraints":[{"kind":"rate_limit","limit":1,"window":-5}]}`, `{"constraint":[]}`,
		`{"constraints":[]} {}`, `{"constraints":[{"kind":"max_amount","amount":5,"currency":"EUR"}]}`, `{"constraints":null}`, ``, `[`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cs, err := constraintsFromJSON(body)
		if err != nil {
			if code := errCode(err); code != "invalid" && code != "bad_request" {
				t.Fatalf("%q gave %v", body, err)
			}
			return
		}
		for _, c := range cs {
			if c.Validate() != nil || !slices.Contains(policy.ConstraintKinds, c.Kind) {
				t.Fatalf("%q let through %+v", body, c)
			}
		}
	})
}

func errCode(err error) string { return apperr.Code(err) }

// FuzzDecodeToolCall: the tool-call decoder is total, and what it accepts
// is what strictjson accepts, with one tool named once, and a key in the
// key format.
func FuzzDecodeToolCall(f *testing.F) {
	for _, seed := range []string{
		`{"tool":"records.put","arguments":{"collection":"c","key":"k","value":{}},"rationale":"because it is needed"}`,
		`{"tool":"records.get","tool":"records.delete","arguments":{},"rationale":"a duplicated key"}`,
		`{"tool":"records.put","arguments":{"key":"\u0000"},"rationale":"a NUL"}`,
		`{"tool":"records.put","arguments":{"key":"\ud800"},"rationale":"a lone surrogate"}`,
		`{"tool":"records.put","arguments":{"n":1e400},"rationale":"a huge number"}`,
		`{"tool":"records.put","arguments":{},"rationale":"trailing"} {}`,
		`{"tool":"x","arguments":{},"rationale":"r","idempotency_key":"short"}`,
		`{"tool":"x","arguments":{},"rationale":"r","confirm":"yes"}`,
		"{\"tool\":\"\xff\"}", `[`, ``,
	} {
		f.Add([]byte(seed), "")
		f.Add([]byte(seed), "header-key-0000000001")
	}
	f.Fuzz(func(t *testing.T, body []byte, headerKey string) {
		in, err := decodeToolCall(body, headerKey)
		if err != nil {
			if code := errCode(err); code != "invalid" && code != "bad_request" {
				t.Fatalf("%q gave %v", body, err)
			}
			return
		}
		if strictjson.Check(body, jsonLimits) != nil {
			t.Fatalf("accepted %q, which strictjson refuses", body)
		}
		if in.IdempotencyKey != "" {
			if _, err := proposals.ParseIdempotencyKey(in.IdempotencyKey); err != nil {
				t.Fatalf("accepted the key %q", in.IdempotencyKey)
			}
		}
		if len(in.Arguments) > 0 && strictjson.Check(in.Arguments, jsonLimits) != nil {
			t.Fatalf("accepted arguments %q", in.Arguments)
		}
	})
}
