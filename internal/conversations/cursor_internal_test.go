package conversations

import (
	"bytes"
	"encoding/base64"
	"math"
	"testing"

	"github.com/google/uuid"
)

func testCursors() pageCursors {
	return pageCursors{key: bytes.Repeat([]byte{9}, 32), conversation: uuid.MustParse("0190f0e4-0000-7000-8000-000000000001"),
		user: uuid.MustParse("0190f0e4-0000-7000-8000-0000000000aa")}
}

func TestCursor_RoundTripsEveryPositionAndDirection(t *testing.T) {
	c := testCursors()
	for _, dir := range []byte{older, newer} {
		for _, pos := range []int64{0, 1, 2, 255, 256, 1 << 31, math.MaxInt64 - 1} {
			s := c.encode(dir, pos)
			if got, ok := c.decode(dir, s); !ok || got != pos {
				t.Errorf("%c %d: decoded %d, %v", dir, pos, got, ok)
			}
			if len(s) != 30 {
				t.Errorf("%c %d: %q is %d characters", dir, pos, s, len(s))
			}
		}
	}
}

// Any change to a cursor, down to one bit, refuses it; so does a cursor
// of another conversation, another user, another key, or the other
// direction.
func TestCursor_RefusesWhatItDidNotSign(t *testing.T) {
	c := testCursors()
	s := c.encode(older, 123456)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			b := bytes.Clone(raw)
			b[i] ^= 1 << bit
			if pos, ok := c.decode(older, base64.RawURLEncoding.EncodeToString(b)); ok {
				t.Errorf("byte %d bit %d flipped: accepted as %d", i, bit, pos)
			}
		}
	}
	// The unused low bits of the last character too (strict decoding).
	last := s[len(s)-1]
	for _, ch := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
		if byte(ch) == last {
			continue
		}
		if _, ok := c.decode(older, s[:len(s)-1]+string(ch)); ok {
			t.Errorf("last character %c for %c: accepted", ch, last)
		}
	}
	other := func(f func(*pageCursors)) pageCursors { o := c; f(&o); return o }
	for name, o := range map[string]pageCursors{
		"another conversation": other(func(o *pageCursors) { o.conversation = uuid.MustParse("0190f0e4-0000-7000-8000-000000000002") }),
		"another user":         other(func(o *pageCursors) { o.user = uuid.MustParse("0190f0e4-0000-7000-8000-0000000000bb") }),
		"another deployment":   other(func(o *pageCursors) { o.key = bytes.Repeat([]byte{8}, 32) }),
	} {
		if _, ok := o.decode(older, s); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, ok := c.decode(newer, s); ok {
		t.Error("an older cursor is accepted as a newer one")
	}
	for _, bad := range []string{"", "x", s + "A", s[:len(s)-1], s + "=", "!" + s[1:]} {
		if _, ok := c.decode(older, bad); ok {
			t.Errorf("%q: accepted", bad)
		}
	}
}
