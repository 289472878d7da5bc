// Package dbtest gives each test its own PostgreSQL database, cloned from a
// template that holds every migration, so tests run in parallel on a real
// server. The server is TEST_DATABASE_URL when set (its role needs CREATEDB),
// otherwise the embedded cluster of internal/pgembed in a shared temporary
// directory, started with durability turned off for speed.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/pgembed"
	"github.com/gatehouse/gatehouse/migrations"
)

var (
	mu          sync.Mutex
	serverURL   string // admin URL of the server
	templateDB  string
	cluster     *pgembed.Handle
	setupFailed error
)

// Main wraps testing.M: it starts (or joins) the test server before the
// package's tests and lets the cluster stop after them when nobody else uses it.
// Each check runs after the tests; a non-zero result fails the package.
func Main(m *testing.M, checks ...func() int) {
	code := m.Run()
	for _, check := range checks {
		if c := check(); code == 0 {
			code = c
		}
	}
	mu.Lock()
	if cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := cluster.Release(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "dbtest:", err)
		}
		cancel()
	}
	mu.Unlock()
	os.Exit(code)
}

// DataDir is where the test cluster lives when TEST_DATABASE_URL is unset.
func DataDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("gatehouse-test-%d", os.Getuid()))
}

func setup(tb testing.TB) (string, string) {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if setupFailed != nil {
		tb.Fatalf("dbtest: %v", setupFailed)
	}
	if serverURL != "" {
		return serverURL, templateDB
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	serverURL = os.Getenv("TEST_DATABASE_URL")
	if serverURL == "" {
		h, err := pgembed.Acquire(ctx, pgembed.Options{
			DataDir:  DataDir(),
			Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "300"},
		})
		if err != nil {
			setupFailed = err
			tb.Fatalf("dbtest: %v", err)
		}
		cluster, serverURL = h, h.URL
	}
	tmpl, err := ensureTemplate(ctx, serverURL)
	if err != nil {
		setupFailed = err
		tb.Fatalf("dbtest: %v", err)
	}
	templateDB = tmpl
	return serverURL, templateDB
}

// ensureTemplate creates, once per migration set, a database holding every
// migration. An advisory lock keeps parallel test binaries from racing.
func ensureTemplate(ctx context.Context, adminURL string) (string, error) {
	name := "gh_tmpl_" + migrationsHash()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(727274)"); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(727274)")
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	if err := db.MigrateUp(withDatabase(adminURL, building)); err != nil {
		return "", err
	}
	// Renaming makes the finished template appear atomically.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return name, nil
}

func migrationsHash() string {
	h := sha256.New()
	names, _ := fs.Glob(migrations.FS, "*.sql")
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(migrations.FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// MustURL creates an empty, migrated database for this test and returns its
// URL. The database is dropped when the test ends.
func MustURL(tb testing.TB) string {
	tb.Helper()
	adminURL, tmpl := setup(tb)
	b := make([]byte, 8)
	rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		tb.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		tb.Fatalf("dbtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			tb.Errorf("dbtest: connect for drop: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("dbtest: drop database: %v", err)
		}
	})
	return withDatabase(adminURL, name)
}

// MustPool returns a pool on a fresh database of this test's own.
func MustPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := db.NewPool(context.Background(), MustURL(tb), 0)
	if err != nil {
		tb.Fatalf("dbtest: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func withDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

// ClusterDir is a temporary directory, removed when t ends, that the
// postgres OS user can reach: used as a data directory, the embedded
// cluster started in it (as root the cluster runs as postgres) keeps its
// files in it and goes with it. Under t.TempDir (mode 0700), or in a
// directory the server creates (0700, for the receipt key), the cluster's
// files would live under /var/lib/gatehouse instead, and outlive the test.
func ClusterDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gatehouse-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
