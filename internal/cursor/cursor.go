// Package cursor signs the opaque page cursors of Gatehouse's lists with
// the deployment's key (cursor_keys, migration 27), so that a caller can
// neither forge a cursor nor move one to another list, filter or user:
// each list lays out its own cursor and names what it binds in the tag.
package cursor

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
)

// Key is the deployment's cursor key, read from the database once.
type Key struct {
	q   *db.Queries
	mu  sync.Mutex
	key []byte
}

// NewKey reads the key through q when it is first needed.
func NewKey(q *db.Queries) *Key { return &Key{q: q} }

// Get returns the key.
func (k *Key) Get(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	key, err := k.q.GetCursorKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	k.key = key
	return key, nil
}

// Tag is HMAC-SHA256(key, parts in order), cut to n bytes.
func Tag(key []byte, n int, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)[:n]
}

// A position cursor is a place in one list for one caller: a time (to
// the microsecond) and an id, after a prefix of the list's own (a
// version, a list's letter):
//
//	base64url( prefix | time: 8 bytes | id: 16 bytes | tag )
//
// where tag = Tag(key, tagLen, bound..., prefix | time | id). What the
// cursor is bound to (a label, the workspace, the user, a filter) is in
// the tag only: a cursor of another list, filter or user fails like an
// altered one.

// EncodePosition makes a position cursor.
func EncodePosition(key []byte, tagLen int, prefix []byte, at time.Time, id uuid.UUID, bound ...[]byte) string {
	b := make([]byte, 0, len(prefix)+8+16+tagLen)
	b = append(b, prefix...)
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixMicro()))
	b = append(b, id[:]...)
	b = append(b, Tag(key, tagLen, append(bound[:len(bound):len(bound)], b)...)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodePosition reads a position cursor made with the same key, tag
// length, prefix and bound parts; ok is false for anything else, and for
// a time PostgreSQL could not read.
func DecodePosition(key []byte, tagLen int, prefix []byte, s string, bound ...[]byte) (at time.Time, id uuid.UUID, ok bool) {
	n := len(prefix) + 8 + 16 + tagLen
	if len(s) != base64.RawURLEncoding.EncodedLen(n) {
		return at, id, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != n || !bytes.Equal(b[:len(prefix)], prefix) {
		return at, id, false
	}
	body := b[:n-tagLen]
	if !hmac.Equal(b[len(body):], Tag(key, tagLen, append(bound[:len(bound):len(bound)], body)...)) {
		return at, id, false
	}
	at = time.UnixMicro(int64(binary.BigEndian.Uint64(body[len(prefix):]))).UTC()
	copy(id[:], body[len(prefix)+8:])
	if y := at.Year(); y < 1 || y > 9999 {
		return time.Time{}, uuid.Nil, false
	}
	return at, id, true
}
