package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestPercentile_NearestRank(t *testing.T) {
	t.Parallel()
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(100-i) * time.Millisecond // unsorted on purpose
	}
	for q, want := range map[float64]time.Duration{0.50: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := percentile(lat, q); got != want {
			t.Errorf("p%g = %s, want %s", q*100, got, want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("no latencies: %s, want 0", got)
	}
}

func TestReadPgbenchLogs_EveryThreadsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prefix := filepath.Join(dir, "c8")
	// client_id transaction_no time(µs) script_no time_epoch time_us
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("c8.4242", "0 0 1000 0 1700000000 1\n1 0 3000 0 1700000000 2\n")
	write("c8.4242.1", "2 0 2000 0 1700000000 3\n3 0 failed 0 1700000000 4\n")
	write("c1.4243", "0 0 9999999 0 1700000000 5\n") // another run's log
	lat, err := readPgbenchLogs(prefix)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lat)
	if want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}; !slices.Equal(lat, want) {
		t.Fatalf("latencies = %v, want %v", lat, want)
	}
	if _, err := readPgbenchLogs(filepath.Join(dir, "none")); err == nil {
		t.Fatal("no log: want an error")
	}
}

func TestParseGoBench(t *testing.T) {
	t.Parallel()
	out := `goos: linux
goarch: amd64
pkg: github.com/gatehouse/gatehouse/internal/policy
cpu: AMD EPYC
BenchmarkDecide_AutoApply-2         	  402518	      1909 ns/op	     384 B/op	       6 allocs/op
PASS
ok  	github.com/gatehouse/gatehouse/internal/policy	6.120s
pkg: github.com/gatehouse/gatehouse/internal/strictjson
BenchmarkCheck_ToolCall-2   	  300000	      3560 ns/op	  98.31 MB/s	    1792 B/op	       1 allocs/op
BenchmarkNoMem   	  10	      12.5 ns/op
`
	got := parseGoBench(out)
	want := []goBench{
		{Package: "internal/policy", Name: "BenchmarkDecide_AutoApply", NsPerOp: 1909, BytesPerOp: 384, AllocsPerOp: 6},
		{Package: "internal/strictjson", Name: "BenchmarkCheck_ToolCall", NsPerOp: 3560, BytesPerOp: 1792, AllocsPerOp: 1},
		{Package: "internal/strictjson", Name: "BenchmarkNoMem", NsPerOp: 12.5, BytesPerOp: -1, AllocsPerOp: -1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parseGoBench =\n%+v\nwant\n%+v", got, want)
	}
	if budget(got[0]) != "within the 2 µs target" || budget(got[1]) != "" {
		t.Errorf("budgets: %q %q", budget(got[0]), budget(got[1]))
	}
}

func TestSoakVerdict_FlatOrGrowing(t *testing.T) {
	t.Parallel()
	samples := func(kib ...int64) []rssSample {
		var out []rssSample
		for i, k := range kib {
			out = append(out, rssSample{At: time.Duration(i) * 10 * time.Second, KiB: k})
		}
		return out
	}
	// The first minute (pools filling, caches) does not count.
	flat := soakResult{Samples: samples(20_000, 30_000, 35_000, 36_000, 36_000, 36_000, 36_500, 36_400, 36_600)}
	if v := flat.verdict(); !strings.HasPrefix(v, "flat") {
		t.Errorf("flat: %s", v)
	}
	growing := soakResult{Samples: samples(36_000, 36_000, 36_000, 36_000, 36_000, 36_000, 36_000, 50_000, 70_000)}
	if v := growing.verdict(); !strings.HasPrefix(v, "GROWING") {
		t.Errorf("growing: %s", v)
	}
}

func TestPgEnv_FromTheDatabaseURL(t *testing.T) {
	t.Parallel()
	env, err := pgEnv("postgres://gatehouse:s3cret@127.0.0.1:54321/gatehouse?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PGHOST=127.0.0.1", "PGPORT=54321", "PGUSER=gatehouse", "PGPASSWORD=s3cret", "PGDATABASE=gatehouse", "PGSSLMODE=disable"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %v lacks %s", env, want)
		}
	}
	// The embedded cluster's URL names its Unix socket's directory.
	env, err = pgEnv("postgres://gatehouse:s3cret@/gatehouse?host=%2Fvar%2Flib%2Fgh%2Fpostgres-run&port=54321&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PGHOST=/var/lib/gh/postgres-run", "PGPORT=54321", "PGPASSWORD=s3cret", "PGDATABASE=gatehouse"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %v lacks %s", env, want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	o, err := parseOptions([]string{"-server-log", "s.log", "-duration", "2s"})
	if err != nil || o.clients != 8 || o.duration != 2*time.Second || o.soak != 0 || !o.goBench {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	for _, args := range [][]string{{}, {"-url", "http://x", "-duration", "500ms"}, {"-url", "http://x", "-clients", "0"},
		{"-url", "http://x", "-soak", "10s"}, {"-url", "http://x", "extra"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}

func TestGoBenchTime_ScalesWithThePhase(t *testing.T) {
	t.Parallel()
	for phase, want := range map[time.Duration]time.Duration{10 * time.Second: time.Second, 2 * time.Second: 200 * time.Millisecond,
		time.Minute: time.Second, time.Second: 100 * time.Millisecond} {
		if got := goBenchTime(phase); got != want {
			t.Errorf("goBenchTime(%s) = %s, want %s", phase, got, want)
		}
	}
}

// The cluster's CPU is its postmaster's (its own and its reaped
// children's) and its running children's, found from any backend; other
// processes are not counted, and a process that cannot be read counts
// nothing.
func TestClusterCPUSeconds_PostmasterAndItsChildren(t *testing.T) {
	proc := t.TempDir()
	// pid: (command, ppid, utime, stime, cutime, cstime) in clock ticks.
	write := func(pid int, comm string, ppid, utime, stime, cutime, cstime int) {
		t.Helper()
		dir := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Fields as in proc(5): pid (comm) state ppid pgrp session tty_nr
		// tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
		line := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 0 0 0 0 0 %d %d %d %d 20 0 1 0\n", pid, comm, ppid, utime, stime, cutime, cstime)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(100, "postgres", 1, 10, 5, 300, 100)           // the postmaster: 15 own, 400 reaped
	write(101, "postgres: gatehouse", 100, 50, 20, 0, 0) // the backend we ask from
	write(102, "postgres: walwriter", 100, 3, 2, 0, 0)
	write(200, "gatehouse serve (x)", 1, 900, 900, 0, 0) // not the cluster's
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}

	got := clusterCPUSeconds(proc, 101)
	if want := (15.0 + 400 + 70 + 5) / clockTicks; math.Abs(got-want) > 1e-9 {
		t.Errorf("cluster CPU = %v s; want %v", got, want)
	}
	if got := clusterCPUSeconds(proc, 999); got != 0 {
		t.Errorf("from a backend that is not there: %v; want 0", got)
	}
	if got := clusterCPUSeconds(proc, 0); got != 0 {
		t.Errorf("without a backend: %v; want 0", got)
	}
	// And the real /proc: this process's own time, once it has used a
	// clock tick or more.
	x := 0
	for deadline := time.Now().Add(5 * time.Second); cpuSeconds(os.Getpid()) == 0 && time.Now().Before(deadline); {
		for i := range 1_000_000 {
			x ^= i
		}
	}
	if got := cpuSeconds(os.Getpid()); got <= 0 {
		t.Errorf("this test's own CPU time = %v (%d); want it read from /proc", got, x)
	}
}

// perCall divides by the calls, and leaves PostgreSQL's CPU unmeasured
// when either reading lacked it.
func TestPerCall(t *testing.T) {
	before := cost{walRecords: 100, walBytes: 1000, serverCPU: 1, clusterCPU: 2, ok: true}
	after := cost{walRecords: 500, walBytes: 9000, serverCPU: 3, clusterCPU: 6, ok: true}
	got := perCall(before, after, 1000)
	want := callCost{WALRecords: 0.4, WALBytes: 8, ServerMs: 2, ClusterMs: 4, OK: true}
	if got != want {
		t.Errorf("perCall = %+v; want %+v", got, want)
	}
	before.clusterCPU = 0
	if got := perCall(before, after, 1000); !got.OK || got.ClusterMs != 0 {
		t.Errorf("without PostgreSQL's CPU: %+v; want the rest, ClusterMs 0", got)
	}
	if got := perCall(before, after, 0); got.OK {
		t.Errorf("no calls: %+v; want not measured", got)
	}
}

// The baseline is the mean of pgbench's runs before and after the phases.
func TestMeanBaseline(t *testing.T) {
	a := row{Name: "pgbench: one-row INSERT (before)", Clients: 8, Want: "-", Rate: 10000, P50: 700 * time.Microsecond, P99: 2 * time.Millisecond,
		Calls: 100000, OK: 100000, Cost: callCost{WALRecords: 3, WALBytes: 200, ClusterMs: 0.10, OK: true}}
	b := row{Name: "pgbench: one-row INSERT (after)", Clients: 8, Want: "-", Rate: 6000, P50: 1100 * time.Microsecond, P99: 6 * time.Millisecond,
		Calls: 60000, OK: 60000, Cost: callCost{WALRecords: 3, WALBytes: 220, ClusterMs: 0.14, OK: true}}
	m := meanBaseline(a, b)
	if m.Name != "pgbench: one-row INSERT" || m.Clients != 8 || m.Rate != 8000 || m.P50 != 900*time.Microsecond || m.P99 != 4*time.Millisecond {
		t.Errorf("mean = %+v", m)
	}
	if m.Calls != 160000 || !m.Cost.OK || m.Cost.WALBytes != 210 || math.Abs(m.Cost.ClusterMs-0.12) > 1e-12 {
		t.Errorf("mean cost = %+v (calls %d)", m.Cost, m.Calls)
	}
	b.Cost.OK = false
	if m := meanBaseline(a, b); m.Cost.OK {
		t.Errorf("a run without its cost gave a mean cost: %+v", m.Cost)
	}
	rep := &report{baselineRuns: []row{a, b}, baselines: []row{m}}
	if got, want := rep.baselineSpread(), "before, 8 clients: 10000/s, p99 2.00 ms; after, 8 clients: 6000/s, p99 6.00 ms"; got != want {
		t.Errorf("spread = %q; want %q", got, want)
	}
	phase := row{Name: "records.put", Clients: 8, Want: "200", Rate: 800, P99: 20 * time.Millisecond}
	if tput, lat := rep.ratios(phase); tput != "0.10×" || lat != "5.0×" {
		t.Errorf("ratios = %s, %s; want 0.10× and 5.0× against the mean", tput, lat)
	}
}

// The ceiling divides the cores by the headline phase's CPU per call, and
// says nothing when that cost was not measured.
func TestCeiling(t *testing.T) {
	base := row{Name: "pgbench: one-row INSERT", Clients: 8, Want: "-", Rate: 8000}
	phase := row{Name: "records.put, auto-apply, one conversation", Clients: 8, Want: "200", Rate: 600,
		Cost: callCost{ServerMs: 1, ClusterMs: 1.5, OK: true}}
	rep := &report{machine: machine{Cores: 2}, baselines: []row{base}, phases: []row{phase}}
	want := "on 2 cores, that phase's CPU per call (PostgreSQL 1.50 ms + server 1.00 ms) allows at most 800 calls/s (0.10× pgbench), " +
		"and PostgreSQL's share alone at most 1333 (0.17×); it ran at 600"
	if got := rep.ceiling(); got != want {
		t.Errorf("ceiling = %q\nwant      %q", got, want)
	}
	rep.phases[0].Cost.ClusterMs = 0
	if got := rep.ceiling(); got != "" {
		t.Errorf("without PostgreSQL's CPU: %q; want nothing", got)
	}
}

// The SLA section says within or over for latency and availability, from
// the tool's own contract.
func TestSLAVerdict(t *testing.T) {
	sla := tools.SLA{P95Latency: 50 * time.Millisecond, Availability: "99.9%"}
	within := slaVerdict("records.get", sla, row{Name: "records.get, auto-run", Clients: 8, Calls: 1000, OK: 1000, P95: 12 * time.Millisecond})
	if !strings.Contains(within, "p95 12.00 ms against the stated 50.00 ms (within)") || !strings.Contains(within, "100.00 % of 1000 calls") || strings.Contains(within, "under") {
		t.Errorf("within: %s", within)
	}
	over := slaVerdict("records.get", sla, row{Name: "records.get, auto-run", Clients: 8, Calls: 1000, OK: 990, P95: 80 * time.Millisecond})
	if !strings.Contains(over, "(over)") || !strings.Contains(over, "(under)") {
		t.Errorf("over: %s", over)
	}
	if got := slaVerdict("payment.initiate", tools.SLA{}, row{Name: "x", Calls: 1}); !strings.Contains(got, "states no service level") {
		t.Errorf("none: %s", got)
	}
	rep := &report{phases: []row{{Name: "records.get, auto-run", Clients: 8, Calls: 10, OK: 10, P95: time.Millisecond}}}
	if v := rep.slaVerdicts(); len(v) != 1 || !strings.Contains(v[0], "`records.get`") {
		t.Errorf("verdicts: %v", v)
	}
}
