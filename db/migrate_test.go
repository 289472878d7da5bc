package db_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Every migration rolls back cleanly, one step at a time, and the whole
// chain applies again: "migrate down" is an operation people rely on.
func TestMigrations_DownToZeroAndUpAgain(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t) // already migrated to the newest version
	m, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	top, dirty, err := m.Version()
	if err != nil || dirty || top == 0 {
		t.Fatalf("start: version %d, dirty %v, %v", top, dirty, err)
	}
	for v := top; v > 0; {
		if err := m.Down(); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
		got, dirty, _ := m.Version()
		if got >= v || dirty {
			t.Fatalf("after down from %d: version %d, dirty %v", v, got, dirty)
		}
		v = got
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if got, dirty, _ := m.Version(); got != top || dirty {
		t.Fatalf("after up: version %d, dirty %v; want %d", got, dirty, top)
	}
}
