package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// TestMain also fails the package when a test wrote into ./var beside the
// sources: the default data directory, where the server puts its receipt
// signing key. Every test gives the server a temporary one instead.
func TestMain(m *testing.M) {
	_, err := os.Stat("var")
	existed := err == nil
	dbtest.Main(m, func() int {
		if _, err := os.Stat("var"); err == nil && !existed {
			fmt.Fprintln(os.Stderr, "a test wrote into cmd/gatehouse/var (the default data directory); give the server a temporary GATEHOUSE_DATA_DIR")
			os.RemoveAll("var")
			return 1
		}
		return 0
	})
}

// server is a real `gatehouse serve` started through run() on port 0.
type server struct {
	URL    string
	env    map[string]string
	stderr *lockedBuffer
	cancel context.CancelFunc
	done   chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`"msg":"listening","url":"(http://[^"]+)"`)

// startServer runs `gatehouse serve --addr 127.0.0.1:0` with env and waits
// until it listens. The server stops when the test ends.
func startServer(t *testing.T, env map[string]string) *server {
	t.Helper()
	if env["GATEHOUSE_DATA_DIR"] == "" {
		// Not ./var beside the test: the signing key goes to a temporary folder.
		env["GATEHOUSE_DATA_DIR"] = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{env: env, stderr: &lockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, s.getenv, strings.NewReader(""), io.Discard, s.stderr)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(s.stderr.String()); m != nil {
			s.URL = m[1]
			t.Cleanup(func() { s.stop(t) })
			return s
		}
		select {
		case err := <-s.done:
			t.Fatalf("serve exited early: %v\n%s", err, s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("serve did not listen in time:\n%s", s.stderr.String())
	return nil
}

func (s *server) getenv(k string) string { return s.env[k] }

func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("serve returned %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("serve did not stop within a minute")
	}
}

// cli runs one gatehouse command with the server's environment.
func (s *server) cli(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if err := run(context.Background(), args, s.getenv, strings.NewReader(stdin), &out, &errOut); err != nil {
		t.Fatalf("gatehouse %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

func signIn(t *testing.T, base, email, password string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the sign-in page:\n%s", page)
	}
	resp, err = c.PostForm(base+"/signin", url.Values{"email": {email}, "password": {password}, "_csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	home, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(home), email) {
		t.Fatalf("sign in as %s: %d\n%s", email, resp.StatusCode, home)
	}
	return c
}

func getJSON(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestServe_TokenFromCLIWorksOnTheAPI(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	if strings.Contains(s.stderr.String(), "the admin's password") {
		t.Fatal("a password given in the environment was printed")
	}
	resp, err := http.Get(s.URL + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	signIn(t, s.URL, "root@example.com", "the admin's password")

	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com", "--role", "approver")
	token := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "agent", "--name", "bot"))
	if !strings.HasPrefix(token, "gh_a_") {
		t.Fatalf("token = %q", token)
	}
	if strings.Contains(s.stderr.String(), token) {
		t.Fatal("the token reached the server log")
	}
	status, me := getJSON(t, s.URL+"/api/v1/me", token)
	if status != http.StatusOK || me["email"] != "ana@example.com" || me["role"] != "approver" {
		t.Fatalf("/api/v1/me = %d %v", status, me)
	}
	status, p := getJSON(t, s.URL+"/api/v1/me", "gh_a_made-up-token")
	if status != http.StatusUnauthorized || p["code"] != "unauthorized" {
		t.Fatalf("made-up token: %d %v", status, p)
	}
	signIn(t, s.URL, "ana@example.com", "a long enough password")
}

// TestServe_EmbeddedPostgresOnAFreshDataDir is the fresh-machine path: no
// DATABASE_URL, an empty data directory, a generated admin password printed
// once, and everything still there after a restart.
func TestServe_EmbeddedPostgresOnAFreshDataDir(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GATEHOUSE_DATA_DIR": dbtest.ClusterDir(t)}
	s := startServer(t, env)
	m := regexp.MustCompile(`created the admin admin@localhost with the password\n\n    (\S+)\n`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no generated admin password printed:\n%s", s.stderr.String())
	}
	password := m[1]
	signIn(t, s.URL, "admin@localhost", password)
	// Another command shares the running cluster.
	s.cli(t, "another long password\n", "user", "create", "--email", "bo@example.com")
	s.stop(t)
	if !strings.Contains(s.stderr.String(), "embedded PostgreSQL stopped") {
		t.Fatalf("the cluster was not stopped on shutdown:\n%s", s.stderr.String())
	}

	again := startServer(t, env)
	if strings.Contains(again.stderr.String(), "created the admin") {
		t.Fatal("a second admin was created on restart")
	}
	signIn(t, again.URL, "admin@localhost", password)
	signIn(t, again.URL, "bo@example.com", "another long password")
}

// TestServe_PprofOnlyOnItsOwnLoopbackListener: profiles are off unless
// GATEHOUSE_PPROF_ADDR is set, and then served on that listener alone,
// never through the main router.
func TestServe_PprofOnlyOnItsOwnLoopbackListener(t *testing.T) {
	t.Parallel()
	pprofLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := pprofLn.Addr().String()
	pprofLn.Close()
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
		"GATEHOUSE_PPROF_ADDR":     pprofAddr,
	})
	get := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("http://" + pprofAddr + "/debug/pprof/cmdline"); code != http.StatusOK {
		t.Errorf("pprof listener: %d, want 200", code)
	}
	if code := get(s.URL + "/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Errorf("main router serves /debug/pprof/cmdline: %d, want 404", code)
	}

	off := startServer(t, map[string]string{"DATABASE_URL": dbtest.MustURL(t), "GATEHOUSE_ADMIN_PASSWORD": "the admin's password"})
	if strings.Contains(off.stderr.String(), "pprof") {
		t.Errorf("pprof is on without GATEHOUSE_PPROF_ADDR:\n%s", off.stderr.String())
	}
}

func TestRun_UsageErrors(t *testing.T) {
	t.Parallel()
	smtp := map[string]string{"GATEHOUSE_SMTP_ADDR": "mail.example.com:587"}
	for _, env := range []map[string]string{smtp, {"GATEHOUSE_SMTP_ADDR": "no-port", "GATEHOUSE_SMTP_FROM": "a@b.c"}} {
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, io.Discard)
		if _, ok := err.(usageError); !ok {
			t.Errorf("serve with %v = %v, want a usage error", env, err)
		}
	}
	for _, args := range [][]string{{}, {"nope"}, {"serve", "--addr", "no-port"}, {"user", "create"}, {"token", "create", "--email", "a@b.c"}, {"migrate", "sideways"}} {
		var errOut strings.Builder
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &errOut)
		if _, ok := err.(usageError); !ok {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}
