package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/pgembed"
)

// machine is where the run happened.
type machine struct {
	Cores    int
	CPU      string
	Postgres string // version and the durability settings that matter
	Go       string
	Date     time.Time
}

func describeMachine(ctx context.Context, dbURL string) (machine, error) {
	m := machine{Cores: runtime.NumCPU(), CPU: cpuModel(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, Date: time.Now().UTC()}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return m, fmt.Errorf("connect to the server's database: %w", err)
	}
	defer conn.Close(ctx)
	var version, fsync, syncCommit, buffers string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('shared_buffers')`).Scan(&version, &fsync, &syncCommit, &buffers); err != nil {
		return m, fmt.Errorf("read the server's settings: %w", err)
	}
	m.Postgres = fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s, shared_buffers %s)", version, fsync, syncCommit, buffers)
	return m, nil
}

// cpuModel is the first "model name" in /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// findPgbench looks next to PostgreSQL's server binaries (the ones the
// embedded cluster runs), then on PATH.
func findPgbench(override string) (string, error) {
	if override != "" {
		return override, nil
	}
	if dir, err := pgembed.FindBinaries(""); err == nil {
		if p := filepath.Join(dir, "pgbench"); executable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pgbench not found next to PostgreSQL's server binaries or on PATH: install Debian's postgresql package (it ships pgbench), or pass -pgbench")
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// baseline is PostgreSQL's own one-row INSERT, driven by pgbench on the
// server's cluster with the same durability settings.
type baseline struct {
	bin, dbURL, dir string
}

// baselineTable is shaped like a record: a collection, a key, a JSON value.
const baselineTable = `CREATE TABLE IF NOT EXISTS bench_baseline (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	collection text NOT NULL,
	key text NOT NULL,
	value jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now())`

// baselineScript is one transaction: one INSERT of one row, autocommit.
const baselineScript = `\set n random(1, 2000000000)
INSERT INTO bench_baseline (collection, key, value) VALUES ('bench', :client_id || '-' || :n, '{"n": 1}');
`

func (b *baseline) prepare(ctx context.Context) error {
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "insert.sql"), []byte(baselineScript), 0o644); err != nil {
		return err
	}
	return b.exec(ctx, baselineTable)
}

func (b *baseline) cleanup(ctx context.Context) {
	_ = b.exec(ctx, "DROP TABLE IF EXISTS bench_baseline")
}

func (b *baseline) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return fmt.Errorf("baseline: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	return nil
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

// run drives pgbench closed loop with n clients for d and reads every
// transaction's latency from its per-transaction log (-l), so p50 and p99
// are exact, computed the same way as the HTTP phases'.
func (b *baseline) run(ctx context.Context, n int, d time.Duration) (row, error) {
	r := row{Name: "pgbench: one-row INSERT", Clients: n, Want: "-", Note: "PostgreSQL alone, same cluster"}
	prefix := filepath.Join(b.dir, fmt.Sprintf("c%d", n))
	secs := int((d + time.Second - 1) / time.Second)
	threads := min(n, runtime.NumCPU())
	cmd := exec.CommandContext(ctx, b.bin, "-n", "-M", "prepared", "-f", filepath.Join(b.dir, "insert.sql"),
		"-c", strconv.Itoa(n), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(secs), "-l", "--log-prefix", prefix)
	cmd.Dir = b.dir
	env, err := pgEnv(b.dbURL)
	if err != nil {
		return r, err
	}
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	before := costNow(ctx, b.dbURL, 0)
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("pgbench -c %d: %w\n%s%s", n, err, out.String(), errOut.String())
	}
	after := costNow(ctx, b.dbURL, 0)
	m := tpsLine.FindStringSubmatch(out.String())
	if m == nil {
		return r, fmt.Errorf("pgbench -c %d printed no tps:\n%s", n, out.String())
	}
	r.Rate, _ = strconv.ParseFloat(m[1], 64)
	lat, err := readPgbenchLogs(prefix)
	if err != nil {
		return r, err
	}
	r.Calls, r.OK, r.Elapsed = len(lat), len(lat), time.Duration(secs)*time.Second
	r.Cost = perCall(before, after, r.Calls)
	r.P50, r.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return r, nil
}

// pgEnv gives pgbench the URL's connection as libpq's variables, the way
// the server connects: over TCP or the Unix socket the URL names (host and
// port in its query), with the password, whatever OS user runs it.
func pgEnv(dbURL string) ([]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, fmt.Errorf("baseline: database URL: %w", err)
	}
	pw, _ := u.User.Password()
	host, port := u.Hostname(), u.Port()
	if h := u.Query().Get("host"); h != "" {
		host = h
	}
	if p := u.Query().Get("port"); p != "" {
		port = p
	}
	if port == "" {
		port = "5432"
	}
	env := []string{"PGHOST=" + host, "PGPORT=" + port, "PGUSER=" + u.User.Username(), "PGPASSWORD=" + pw,
		"PGDATABASE=" + strings.TrimPrefix(u.Path, "/"), "PGAPPNAME=gatehouse-bench"}
	if mode := u.Query().Get("sslmode"); mode != "" {
		env = append(env, "PGSSLMODE="+mode)
	}
	return env, nil
}

// readPgbenchLogs reads every per-transaction log pgbench wrote for one
// run (one file per thread: prefix.<pid> and prefix.<pid>.<thread>). A
// line is "client_id transaction_no time script_no time_epoch time_us",
// where time is the transaction's latency in microseconds.
func readPgbenchLogs(prefix string) ([]time.Duration, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("pgbench wrote no per-transaction log at %s.*", prefix)
	}
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				continue // "skipped" or "failed" transactions carry no latency
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		f.Close()
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("pgbench logged no transaction at %s.*", prefix)
	}
	return lat, nil
}

// percentile is the nearest-rank percentile of lat (sorted in place).
func percentile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	if !slices.IsSorted(lat) {
		slices.Sort(lat)
	}
	i := int(math.Ceil(q*float64(len(lat)))) - 1
	return lat[max(0, min(i, len(lat)-1))]
}
