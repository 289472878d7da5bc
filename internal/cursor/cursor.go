// Package cursor signs the opaque page cursors of Gatehouse's lists with
// the deployment's key (cursor_keys, migration 27), so that a caller can
// neither forge a cursor nor move one to another list, filter or user:
// each list lays out its own cursor and names what it binds in the tag.
package cursor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"

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
