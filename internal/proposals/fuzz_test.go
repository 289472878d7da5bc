package proposals_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gatehouse/gatehouse/internal/proposals"
)

// FuzzParseIdempotencyKey: a key is accepted exactly when it is 16 to 64
// of A–Z a–z 0–9 _ -, whatever else a caller puts in the header.
func FuzzParseIdempotencyKey(f *testing.F) {
	for _, seed := range []string{"abcdefghijklmnop", "send-ana-00000000001", "short", "with space in it xxxx", "ключ-ключ-ключ-ключ",
		"abcdefghijklmnop\n", "abcdefghijklmnop\x00", string(bytes.Repeat([]byte("a"), 65)), "\xff\xfeabcdefghijklmnop", "abcdefghijklmnop\u200b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got, err := proposals.ParseIdempotencyKey(key)
		valid := len(key) >= 16 && len(key) <= 64
		for _, r := range []byte(key) {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				valid = false
			}
		}
		if valid != (err == nil) || (err == nil && got != key) {
			t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; valid %v", key, got, err, valid)
		}
	})
}

// FuzzRequestHash: the hash of a request is the hash of its meaning, not
// its bytes: decoding and re-encoding it (which reorders keys and respaces
// it) hashes the same, and no input panics.
func FuzzRequestHash(f *testing.F) {
	for _, seed := range []string{`{"tool":"records.put","arguments":{"collection":"c","key":"k","value":{}},"rationale":"because"}`,
		`{"b":1,"a":[1,2,{"z":null,"y":true}]}`, `{"n":1e308,"m":-0,"s":"\ud83d\ude00"}`, `[]`, `"x"`, `{"a":"\u0000"}`, `{"a":1,"a":2}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		h1, err := proposals.RequestHash(v)
		if err != nil {
			return // a value canonical JSON cannot hold is refused, not hashed
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var w any
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		h2, err := proposals.RequestHash(w)
		if err != nil || !bytes.Equal(h1, h2) {
			t.Fatalf("%s hashes differently once re-encoded: %v", data, err)
		}
	})
}
