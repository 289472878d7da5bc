package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// FuzzValidateArguments: the argument validator is total. Whatever the
// bytes, every built-in tool's validator answers without panicking, and
// what it accepts is a JSON object.
func FuzzValidateArguments(f *testing.F) {
	for _, seed := range []string{`{"collection":"c","key":"k","value":{}}`, `{"query":"x"}`, `{"to":"a@b.co","subject":"s","body":"b"}`,
		`{"amount":1e400,"currency":"EUR","payee":"x"}`, `{"collection":"c","keys":["a","a"]}`, `{"key":"\u0000"}`, `{"key":"\ud800"}`,
		`[]`, `null`, `{"collection":"c","key":"k","value":{}} trailing`, "\xff", `{"url":"http://x","payload":{}}`} {
		f.Add([]byte(seed))
	}
	r, err := tools.Builtin()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tool := range r.List() {
			if tool.ValidateArguments(json.RawMessage(data)) != nil {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil || m == nil {
				t.Fatalf("%s accepted %q, which is not a JSON object: %v", tool.Name, data, err)
			}
		}
	})
}
