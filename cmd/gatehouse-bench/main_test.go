package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
