package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The database's default ids for the tables every call writes are
// UUIDv7 (RFC 9562): version 7, the RFC variant, the creation time in
// the first 48 bits, so ids made later sort after.
func TestUUIDv7Default(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	before := time.Now().Add(-time.Second)
	var ids []uuid.UUID
	for range 3 {
		var id uuid.UUID
		if err := pool.QueryRow(context.Background(), `SELECT gatehouse_uuid_v7()`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		time.Sleep(2 * time.Millisecond) // ordering is by the millisecond
	}
	for i, id := range ids {
		if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: version %d variant %v, want 7 and RFC 4122", id, id.Version(), id.Variant())
		}
		sec, nsec := id.Time().UnixTime()
		if at := time.Unix(sec, nsec); at.Before(before) || at.After(time.Now().Add(time.Second)) {
			t.Fatalf("%s carries the time %s, not now", id, at)
		}
		if i > 0 && id.String() <= ids[i-1].String() {
			t.Fatalf("%s made after %s sorts before it", id, ids[i-1])
		}
	}
}
