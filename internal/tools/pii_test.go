package tools

import (
	"encoding/json"
	"slices"
	"testing"
)

// A read names the personal-data fields its arguments or result held,
// never their values.
func TestPIIRead_NamesTheFieldsNeverTheValues(t *testing.T) {
	t.Parallel()
	tool := &Tool{Contract: Contract{PIIFields: []string{"email", "phone", "to"}}}
	got := tool.PIIRead(json.RawMessage(`{"collection": "customers", "key": "ana"}`),
		json.RawMessage(`{"records": [{"value": {"email": "ana@example.com", "plan": "pro"}}, {"value": {"phone": "+34 600", "email": "bo@example.com"}}]}`))
	if !slices.Equal(got, []string{"email", "phone"}) {
		t.Errorf("got %v, want [email phone]", got)
	}
	if got := tool.PIIRead(json.RawMessage(`{"to": "ana@example.com"}`), nil); !slices.Equal(got, []string{"to"}) {
		t.Errorf("arguments: got %v", got)
	}
	if got := tool.PIIRead(json.RawMessage(`{"query": "email"}`), json.RawMessage(`{"count": 0}`)); got != nil {
		t.Errorf("a value that spells a field's name is not the field: %v", got)
	}
	if got := (&Tool{}).PIIRead(json.RawMessage(`{"email": "x"}`), nil); got != nil {
		t.Errorf("a tool without pii fields: %v", got)
	}
}

func TestRedactPII_ReplacesTheValuesAtAnyDepth(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		in     string
		fields []string
		want   string
	}{
		"top level":       {`{"to": "ana@example.com", "subject": "Hi"}`, []string{"to"}, `{"subject":"Hi","to":"[redacted]"}`},
		"nested and list": {`{"value": {"email": "a@b.c", "list": [{"email": "d@e.f"}]}}`, []string{"email"}, `{"value":{"email":"[redacted]","list":[{"email":"[redacted]"}]}}`},
		"an object value": {`{"to": {"name": "Ana"}}`, []string{"to"}, `{"to":"[redacted]"}`},
		"nothing to hide": {`{"subject": "Hi"}`, []string{"to"}, `{"subject": "Hi"}`},
		"no fields":       {`{"to": "x"}`, nil, `{"to": "x"}`},
		"not JSON":        {`{"to": `, []string{"to"}, `"[redacted]"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := string(RedactPII(json.RawMessage(c.in), c.fields)); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

// A tool the registry does not know is redacted by every tool's fields.
func TestRegistry_PIIFieldsOfAnUnknownToolAreEveryTools(t *testing.T) {
	t.Parallel()
	r, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.PIIFields("email.send"); !slices.Equal(got, []string{"to"}) {
		t.Errorf("email.send: %v", got)
	}
	all := r.PIIFields("")
	for _, f := range []string{"to", "payee", "email"} {
		if !slices.Contains(all, f) {
			t.Errorf("every tool's fields %v lack %s", all, f)
		}
	}
}

// Only a read's row says what it read, and only when it read some.
func TestMarkPIIRead_OnlyOnAReadThatReadSome(t *testing.T) {
	t.Parallel()
	r, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	get, _ := r.Get("records.get")
	data := map[string]any{}
	MarkPIIRead(data, get, json.RawMessage(`{"collection": "customers", "key": "ana"}`), json.RawMessage(`{"value": {"email": "ana@example.com"}}`))
	if got, _ := data["pii_read"].([]string); !slices.Equal(got, []string{"email"}) {
		t.Errorf("records.get: %v", data)
	}
	none := map[string]any{}
	MarkPIIRead(none, get, json.RawMessage(`{}`), json.RawMessage(`{"value": {"plan": "pro"}}`))
	email, _ := r.Get("email.send")
	MarkPIIRead(none, email, json.RawMessage(`{"to": "ana@example.com"}`), nil)
	if len(none) != 0 {
		t.Errorf("a read of nothing personal, or a write: %v", none)
	}
}
