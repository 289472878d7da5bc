package pgembed_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/pgembed"
)

// TestAcquire_SharedClusterStopsWithLastUser starts a cluster in a fresh
// directory, joins it from a second handle, and checks that only the last
// Release stops it, and that a restart reuses the same data.
func TestAcquire_SharedClusterStopsWithLastUser(t *testing.T) {
	if _, err := pgembed.FindBinaries(""); err != nil {
		t.Fatalf("PostgreSQL binaries are required: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(dbtest.ClusterDir(t), "data")
	opts := pgembed.Options{DataDir: dir, Settings: map[string]string{"fsync": "off"}}

	first, err := pgembed.Acquire(ctx, opts)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	mustExec(t, first.URL, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
	// Over the cluster's Unix socket, not TCP: the server has no address.
	if conn, err := pgx.Connect(ctx, first.URL); err != nil {
		t.Fatal(err)
	} else {
		var tcp bool
		if err := conn.QueryRow(ctx, "SELECT inet_server_addr() IS NOT NULL").Scan(&tcp); err != nil || tcp {
			t.Errorf("connected over TCP (%v) with %s; want the Unix socket", err, strings.Split(first.URL, "@")[1])
		}
		conn.Close(ctx)
	}

	second, err := pgembed.Acquire(ctx, opts)
	if err != nil {
		t.Fatalf("second acquire: %v", err)
	}
	if second.URL != first.URL {
		t.Fatalf("second handle got another cluster: %q vs %q", second.URL, first.URL)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("first release: %v", err)
	}
	mustExec(t, second.URL, "SELECT 1") // still running for the second user
	if err := second.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if conn, err := pgx.Connect(ctx, second.URL); err == nil {
		conn.Close(ctx)
		t.Fatal("cluster still accepts connections after the last release")
	}
	if out, _ := exec.Command("pgrep", "-f", filepath.Join(dir, "postgres")).Output(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("postgres processes left behind: %s", out)
	}

	third, err := pgembed.Acquire(ctx, opts)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer third.Release(ctx)
	conn, err := pgx.Connect(ctx, third.URL)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "still here" {
		t.Fatalf("data after restart = %q, %v", v, err)
	}
}

func TestAcquire_MissingBinariesNamesThePackage(t *testing.T) {
	_, err := pgembed.FindBinaries(t.TempDir())
	if err == nil {
		t.Fatal("want an error for a directory without binaries")
	}
	for _, want := range []string{"apt-get install postgresql", "DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func mustExec(t *testing.T, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}
