package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/strictjson"
)

// FuzzSplitArguments: MCP's arguments are read as strictly as every JSON
// body. Any arguments give either an error, or the tool's arguments as a
// JSON object that the strict checks accept, without Gatehouse's own
// (rationale, idempotency_key), never a panic.
func FuzzSplitArguments(f *testing.F) {
	for _, seed := range []string{`{"collection":"c","key":"k","rationale":"keep the record current"}`, `null`, ``, `[]`, `"x"`,
		`{"a":1,"a":2}`, `{"a":"\u0000"}`, `{"a":"\ud800"}`, `{"a":1e400}`, `{"rationale":5}`, `{"idempotency_key":"k","rationale":"r"}`,
		strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40), `{"a":{"rationale":"nested stays"}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		args, _, _, err := splitArguments(raw)
		if err != nil {
			return
		}
		if err := strictjson.Check(args, strictjson.Limits{}); err != nil {
			t.Fatalf("%q gave arguments %s that the strict checks refuse: %v", raw, args, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(args, &m); err != nil {
			t.Fatalf("%q gave %s, not a JSON object", raw, args)
		}
		if _, ok := m[argRationale]; ok {
			t.Fatalf("%q: the rationale stayed in the tool's arguments %s", raw, args)
		}
		if _, ok := m[argIdempotencyKey]; ok {
			t.Fatalf("%q: the idempotency key stayed in the tool's arguments %s", raw, args)
		}
	})
}
