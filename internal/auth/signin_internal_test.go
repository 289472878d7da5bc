package auth

import "testing"

func TestBrakeAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.1":                "192.0.2.1",
		"::ffff:192.0.2.1":         "192.0.2.1",
		"2001:db8:1:2:3:4:5:6":     "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":       "2001:db8:1:2::/64",
		"fe80::1%eth0":             "fe80::/64",
		"::1":                      "::/64",
		"":                         "unknown",
		"not an address":           "unknown",
		"192.0.2.1:443":            "unknown",
		"[2001:db8::1]":            "unknown",
		"999.1.1.1":                "unknown",
		"2001:db8::1, 192.0.2.300": "unknown",
	} {
		if got := BrakeAddress(in); got != want {
			t.Errorf("BrakeAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSignInBuckets_HaveKeysOfBoundedSize(t *testing.T) {
	t.Parallel()
	long := make([]byte, 1<<20)
	for i := range long {
		long[i] = 'a'
	}
	for _, b := range signInBuckets(string(long)+"\xff", "unknown") {
		if len(b.key) > 100 {
			t.Errorf("bucket key of %d bytes", len(b.key))
		}
	}
	a, b := signInBuckets("ana@example.com", "192.0.2.1"), signInBuckets("ana@example.com", "192.0.2.2")
	if a[0].key == b[0].key || a[1].key == b[1].key {
		t.Error("two addresses share a bucket")
	}
	if c := signInBuckets("bo@example.com", "192.0.2.1"); c[0].key == a[0].key || c[1].key != a[1].key {
		t.Error("two accounts share a pair, or one address has two buckets")
	}
}
