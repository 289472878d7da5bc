package pgembed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cluster kept outside its data directory (under /var/lib/gatehouse)
// is outside it; one in it is not.
func TestOutside(t *testing.T) {
	for _, c := range []struct {
		pgdata, dataDir string
		want            bool
	}{
		{"/var/lib/gatehouse/abc/postgres", "/root/work/var", true},
		{"/root/work/var/postgres", "/root/work/var", false},
		{"/root/work/var/../other/postgres", "/root/work/var", true},
		{"/root/work/variety/postgres", "/root/work/var", true},
	} {
		if got := outside(c.pgdata, c.dataDir); got != c.want {
			t.Errorf("outside(%s, %s) = %v, want %v", c.pgdata, c.dataDir, got, c.want)
		}
	}
}

// An orphaned cluster is renamed aside with its files, never deleted; one
// that may be running (a postmaster.pid) is left where it is, and the
// error says how to stop it.
func TestSetAside(t *testing.T) {
	base := t.TempDir()
	pgdata := filepath.Join(base, "postgres")
	if err := os.MkdirAll(pgdata, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pgdata, "PG_VERSION"), []byte("15\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pgdata, "postmaster.pid"), []byte("123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := setAside(pgdata); err == nil || !strings.Contains(err.Error(), "pg_ctl stop") {
		t.Fatalf("a cluster that may be running: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); err != nil {
		t.Fatalf("the running cluster was moved: %v", err)
	}
	os.Remove(filepath.Join(pgdata, "postmaster.pid"))
	aside, err := setAside(pgdata)
	if err != nil || !strings.HasPrefix(aside, pgdata+".set-aside-") {
		t.Fatalf("set aside: %s %v", aside, err)
	}
	if b, err := os.ReadFile(filepath.Join(aside, "PG_VERSION")); err != nil || string(b) != "15\n" {
		t.Fatalf("the cluster's files were not kept: %q %v", b, err)
	}
	if _, err := os.Stat(pgdata); !os.IsNotExist(err) {
		t.Fatalf("the old name is still there: %v", err)
	}
}
