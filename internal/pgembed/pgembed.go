// Package pgembed runs a project-local PostgreSQL cluster from the machine's
// own server binaries: the embedded default used when no DATABASE_URL is set.
//
// Several processes may use one cluster at once (a running `serve`, a
// `gatehouse user create`, the test binaries of parallel packages). They
// coordinate with two flock(2) locks in the data directory:
//
//   - postgres.users.lock: every user holds it shared while it uses the
//     cluster; the last one to leave gets it exclusively and stops the cluster.
//   - postgres.start.lock: held exclusively while one process initialises or
//     starts the cluster, so two never race on initdb or pg_ctl start.
//
// When the process runs as root the cluster runs as an unprivileged OS user
// (Debian's "postgres"), because initdb and postgres refuse to run as root.
package pgembed

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries says that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (looked on PATH, in `pg_config --bindir` and under /usr/lib/postgresql/*/bin); " +
	"install Debian's postgresql package (apt-get install postgresql) or set DATABASE_URL to a PostgreSQL server you run")

const (
	superuser = "gatehouse"
	database  = "gatehouse"
)

// Options says where the cluster lives and how it runs.
type Options struct {
	// DataDir is the application's data directory; the cluster lives in
	// DataDir/postgres, its password in DataDir/postgres.password.
	DataDir string
	// BinDir overrides the search for initdb, pg_ctl and postgres.
	BinDir string
	// Settings are extra server settings passed as -c name=value at start
	// (tests turn fsync off, for example). Only applied when this call starts
	// the cluster.
	Settings map[string]string
	// RunAs names the OS user the cluster runs as when the process is root.
	// Empty means "postgres".
	RunAs  string
	Logger *slog.Logger
}

// Handle is one process's use of the cluster.
type Handle struct {
	// URL is a postgres:// URL for the cluster's "gatehouse" database.
	URL string

	users  *os.File
	pgdata string
	bin    string
	cred   *syscall.Credential
	log    *slog.Logger
}

// Acquire makes sure the cluster exists and runs, and registers this process
// as one of its users. Call Release (or Detach) when done.
func Acquire(ctx context.Context, opts Options) (*Handle, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgembed: data dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("pgembed: create data dir: %w", err)
	}
	bin, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	cred, err := credentialFor(opts.RunAs)
	if err != nil {
		return nil, err
	}
	clusterBase := dataDir
	if cred != nil && !traversable(dataDir, cred) {
		// The unprivileged user cannot reach the data directory (a clone under
		// /root, say): keep the cluster files where it can, keyed by this
		// data directory so each project gets its own cluster.
		clusterBase = filepath.Join("/var/lib/gatehouse", shortHash(dataDir))
		if err := os.MkdirAll(clusterBase, 0o755); err != nil {
			return nil, fmt.Errorf("pgembed: create %s: %w", clusterBase, err)
		}
		log.Info("data directory is not reachable by the postgres OS user; cluster files live elsewhere", "cluster_dir", clusterBase)
	}

	users, err := os.OpenFile(filepath.Join(dataDir, "postgres.users.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgembed: open lock: %w", err)
	}
	// Shared while we use the cluster; this waits while another process stops it.
	if err := flock(ctx, users, syscall.LOCK_SH); err != nil {
		users.Close()
		return nil, fmt.Errorf("pgembed: lock: %w", err)
	}
	h := &Handle{users: users, pgdata: filepath.Join(clusterBase, "postgres"), bin: bin, cred: cred, log: log}
	url, err := h.ensureRunning(ctx, dataDir, clusterBase, opts.Settings)
	if err != nil {
		users.Close()
		return nil, err
	}
	h.URL = url
	return h, nil
}

func (h *Handle) ensureRunning(ctx context.Context, dataDir, clusterBase string, settings map[string]string) (string, error) {
	start, err := os.OpenFile(filepath.Join(dataDir, "postgres.start.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("pgembed: open start lock: %w", err)
	}
	defer start.Close() // closing releases the lock
	if err := flock(ctx, start, syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("pgembed: start lock: %w", err)
	}

	password, err := h.ensureInitialised(ctx, dataDir)
	if err != nil {
		return "", err
	}
	runDir := filepath.Join(clusterBase, "postgres-run")
	if err := h.mkdirOwned(runDir, 0o700); err != nil {
		return "", err
	}
	port, err := h.runningPort()
	if err != nil {
		return "", err
	}
	if port == 0 {
		if port, err = h.start(ctx, runDir, settings); err != nil {
			return "", err
		}
	}
	// Over the cluster's Unix socket when it has one: a round trip costs
	// both processes less CPU than over TCP on loopback.
	socket := socketDir(runDir)
	if socket != "" {
		if _, err := os.Stat(filepath.Join(socket, ".s.PGSQL."+strconv.Itoa(port))); err != nil {
			socket = "" // started without one (an older gatehouse): TCP
		}
	}
	u := clusterURL(password, socket, port, database)
	if err := ensureDatabase(ctx, clusterURL(password, socket, port, "postgres"), database); err != nil {
		return "", err
	}
	return u, nil
}

// ensureInitialised runs initdb once and returns the superuser's password.
func (h *Handle) ensureInitialised(ctx context.Context, dataDir string) (string, error) {
	pwPath := filepath.Join(dataDir, "postgres.password")
	if _, err := os.Stat(filepath.Join(h.pgdata, "PG_VERSION")); err == nil {
		pw, err := os.ReadFile(pwPath)
		switch {
		case err == nil:
			return strings.TrimSpace(string(pw)), nil
		case !errors.Is(err, fs.ErrNotExist) || !outside(h.pgdata, dataDir):
			return "", fmt.Errorf("pgembed: the cluster %s exists but its password file is unreadable (%w): restore %s, or move the cluster away to start afresh", h.pgdata, err, pwPath)
		}
		// The cluster lives outside the data directory (keyed by its path)
		// and the data directory has no password for it: the directory was
		// removed, or this is a new clone at the same path. The cluster is
		// the old directory's: it is set aside, never deleted, and a new
		// one is made.
		aside, err := setAside(h.pgdata)
		if err != nil {
			return "", err
		}
		h.log.Warn("the cluster of an earlier data directory at this path was set aside; a new one is made", "set_aside", aside, "data_dir", dataDir)
	}
	if entries, err := os.ReadDir(h.pgdata); err == nil && len(entries) > 0 {
		return "", fmt.Errorf("pgembed: %s is not empty but holds no cluster (no PG_VERSION); move it away and start again", h.pgdata)
	}
	password := randomHex(24)
	if err := os.WriteFile(pwPath, []byte(password+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("pgembed: write password file: %w", err)
	}
	if err := h.mkdirOwned(h.pgdata, 0o700); err != nil {
		return "", err
	}
	// initdb reads the password from a file the cluster's user can read; it
	// lives inside the cluster directory only for the length of initdb.
	pwFile := filepath.Join(filepath.Dir(h.pgdata), ".initdb-pw-"+randomHex(6))
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("pgembed: write initdb password: %w", err)
	}
	defer os.Remove(pwFile)
	if h.cred != nil {
		if err := os.Chown(pwFile, int(h.cred.Uid), int(h.cred.Gid)); err != nil {
			return "", fmt.Errorf("pgembed: chown initdb password: %w", err)
		}
	}
	h.log.Info("initialising embedded PostgreSQL cluster", "dir", h.pgdata)
	out, err := h.command(ctx, "initdb", "-D", h.pgdata, "-U", superuser, "--auth=scram-sha-256",
		"--pwfile="+pwFile, "--encoding=UTF8", "--no-locale", "--no-instructions").CombinedOutput()
	if err != nil {
		os.RemoveAll(h.pgdata)
		return "", fmt.Errorf("pgembed: initdb: %w\n%s", err, out)
	}
	return password, nil
}

// outside reports whether the cluster directory pgdata is outside the data
// directory (under /var/lib/gatehouse, for a data directory the postgres
// OS user cannot reach).
func outside(pgdata, dataDir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dataDir), filepath.Clean(pgdata))
	return err != nil || rel == ".." || strings.HasPrefix(rel, "../")
}

// setAside renames a cluster directory that no data directory owns any
// more to <dir>.set-aside-<time>, and returns the new name. A cluster
// that may be running (it has a postmaster.pid) is left alone: the error
// says how to stop it.
func setAside(pgdata string) (string, error) {
	if _, err := os.Stat(filepath.Join(pgdata, "postmaster.pid")); err == nil {
		return "", fmt.Errorf("pgembed: the cluster %s belongs to an earlier data directory at this path and may be running (it has a postmaster.pid): stop it (pg_ctl stop -D %s, as its OS user) and start again", pgdata, pgdata)
	}
	aside := pgdata + ".set-aside-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(pgdata, aside); err != nil {
		return "", fmt.Errorf("pgembed: set aside %s: %w", pgdata, err)
	}
	return aside, nil
}

// runningPort returns the port of a running postmaster of this cluster, or 0.
func (h *Handle) runningPort() (int, error) {
	err := h.command(context.Background(), "pg_ctl", "status", "-D", h.pgdata).Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return 0, nil // 3: not running
	}
	if err != nil {
		return 0, fmt.Errorf("pgembed: pg_ctl status: %w", err)
	}
	return readPort(filepath.Join(h.pgdata, "postmaster.pid"))
}

func (h *Handle) start(ctx context.Context, runDir string, settings map[string]string) (int, error) {
	socket := socketDir(runDir)
	logFile := filepath.Join(runDir, "postgres.log")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return 0, fmt.Errorf("pgembed: pick a port: %w", err)
		}
		opts := []string{
			"-p " + strconv.Itoa(port),
			"-c listen_addresses='127.0.0.1'",
			"-c unix_socket_directories='" + socket + "'",
		}
		keys := make([]string, 0, len(settings))
		for k := range settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			opts = append(opts, "-c "+k+"='"+settings[k]+"'")
		}
		out, err := h.command(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", h.pgdata, "-l", logFile,
			"-o", strings.Join(opts, " ")).CombinedOutput()
		if err == nil {
			h.log.Info("embedded PostgreSQL started", "port", port)
			return port, nil
		}
		lastErr = fmt.Errorf("pgembed: pg_ctl start: %w\n%s\n%s", err, out, tail(logFile, 20))
	}
	return 0, lastErr
}

// Release ends this process's use of the cluster and stops the cluster when
// no other process uses it.
func (h *Handle) Release(ctx context.Context) error {
	defer h.users.Close()
	err := syscall.Flock(int(h.users.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil // someone else still uses it; the last one stops it
	}
	if err != nil {
		return fmt.Errorf("pgembed: lock for stop: %w", err)
	}
	out, err := h.command(ctx, "pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", h.pgdata).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgembed: pg_ctl stop: %w\n%s", err, out)
	}
	h.log.Info("embedded PostgreSQL stopped")
	return nil
}

// Detach ends this process's use of the cluster but leaves it running (for
// `gatehouse db url`, whose caller wants to connect after it exits). The next
// process to Release it stops it.
func (h *Handle) Detach() { h.users.Close() }

func (h *Handle) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, name), args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + h.bin + ":/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	if h.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: h.cred}
	}
	return cmd
}

func (h *Handle) mkdirOwned(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("pgembed: create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("pgembed: chmod %s: %w", dir, err)
	}
	if h.cred != nil {
		if err := os.Chown(dir, int(h.cred.Uid), int(h.cred.Gid)); err != nil {
			return fmt.Errorf("pgembed: chown %s: %w", dir, err)
		}
	}
	return nil
}

// FindBinaries returns a directory holding initdb, pg_ctl and postgres.
func FindBinaries(override string) (string, error) {
	if override != "" {
		if hasServerBinaries(override) {
			return override, nil
		}
		return "", fmt.Errorf("pgembed: %s has no initdb, pg_ctl and postgres: %w", override, ErrNoBinaries)
	}
	var candidates []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgVersion(versions[i]) > pgVersion(versions[j]) })
	candidates = append(candidates, versions...)
	for _, dir := range candidates {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func credentialFor(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("pgembed: running as root, PostgreSQL must run as an unprivileged OS user, and %q does not exist "+
			"(Debian's postgresql package creates it; or set DATABASE_URL): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// traversable reports whether cred may search every directory down to dir.
func traversable(dir string, cred *syscall.Credential) bool {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := fi.Mode().Perm()
		var bit os.FileMode = 0o001
		switch {
		case st.Uid == cred.Uid:
			bit = 0o100
		case st.Gid == cred.Gid:
			bit = 0o010
		}
		if mode&bit == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

func flock(ctx context.Context, f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func readPort(pidFile string) (int, error) {
	f, err := os.Open(pidFile)
	if err != nil {
		return 0, fmt.Errorf("pgembed: read postmaster.pid: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		if line == 4 { // pid, data dir, start time, port, ...
			port, err := strconv.Atoi(strings.TrimSpace(s.Text()))
			if err != nil {
				return 0, fmt.Errorf("pgembed: postmaster.pid port: %w", err)
			}
			return port, nil
		}
	}
	return 0, fmt.Errorf("pgembed: postmaster.pid has no port line")
}

func ensureDatabase(ctx context.Context, adminURL, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("pgembed: connect: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("pgembed: look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgembed: create database: %w", err)
	}
	return nil
}

// socketDir is the directory of the cluster's Unix socket, or "" when the
// socket's path would be too long for one (the cluster then listens on
// TCP on loopback only).
func socketDir(runDir string) string {
	if len(runDir)+len("/.s.PGSQL.65535") > 100 {
		return ""
	}
	return runDir
}

// clusterURL is the URL of database db: over the Unix socket in socket,
// or over TCP on loopback when socket is "".
func clusterURL(password, socket string, port int, db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	if socket != "" {
		u.Host = ""
		u.RawQuery = url.Values{"host": {socket}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}.Encode()
	}
	return u.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

func shortHash(s string) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return strconv.FormatUint(h, 36)
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
