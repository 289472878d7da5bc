// Command gatehouse-bench measures the gate against PostgreSQL's own limit,
// on one cluster in one run: pgbench's one-row INSERT first, then
// closed-loop HTTP phases through a real server on the same cluster, then
// the Go micro-benchmarks of the pure parts. Every HTTP figure is reported
// beside the pgbench figure at the same client count, so the ratios mean
// something on a shared, noisy machine.
//
//	gatehouse-bench -server-log server.log -server-pid 1234 -gatehouse bin/gatehouse -duration 10s -doc docs/performance.md
//
// `make bench` (.ci/bench) starts a throwaway server on its own embedded
// PostgreSQL and runs this against it. The command finds the server's URL
// (and its pprof listener, if any) in its log, waits for /readyz, makes a
// member with an agent and a user token with the gatehouse CLI, and asks
// the CLI for the database URL (`gatehouse db url`), so it needs nothing
// but Go and PostgreSQL's binaries.
//
// With -volume N it also times every page and list API on an empty
// database and on one filled to N calls, with a server and a database of
// its own on the same cluster (volume.go); -volume-only runs that alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse-bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	url       string        // the server; empty: read from serverLog
	serverLog string        // the server's log (JSON lines at level info)
	serverPID int           // for its RSS; 0: not reported
	gatehouse string        // the gatehouse binary, for users, tokens and the database URL
	pgbench   string        // pgbench; empty: found next to PostgreSQL's server binaries
	clients   int           // clients of the concurrent phases
	duration  time.Duration // each phase
	soak      time.Duration // an extra long phase sampling RSS; 0: off
	profile   bool          // take a CPU profile of the headline phase
	goBench   bool          // run the Go micro-benchmarks
	doc       string        // write the report here; empty: print only
	command   string        // the command that ran this, quoted in the report
	revision  string        // the source revision, quoted in the report
	volume    int           // the volume phase's calls; 0: off
	// volumeOnly runs the volume phase alone (no pgbench, write phases or
	// micro-benchmarks), printing only.
	volumeOnly bool
	// volumeKeep leaves the volume phase's database filled (and says
	// where), to look into a slow page with EXPLAIN or a profile.
	volumeKeep bool
	// mcpOnly runs only the reads over REST and the MCP phases (no
	// pgbench, write phases or micro-benchmarks), printing only: to look
	// into the gateway's per-call cost.
	mcpOnly bool
	// upstream is the benchmark's upstream MCP server (-serve-upstream
	// started it; the server's policy file names it "bench"); empty: the
	// MCP phases are skipped.
	upstream string
	// serveUpstream: serve the upstream, write its URL to this file, and
	// do nothing else.
	serveUpstream string
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("gatehouse-bench", flag.ContinueOnError)
	fs.StringVar(&o.url, "url", "", "the server (default: the URL its log says it listens on)")
	fs.StringVar(&o.serverLog, "server-log", "", "the server's log, to find its URL and pprof listener")
	fs.IntVar(&o.serverPID, "server-pid", 0, "the server's process id, for its resident memory (RSS)")
	fs.StringVar(&o.gatehouse, "gatehouse", "gatehouse", "the gatehouse binary (user create, token create, db url)")
	fs.StringVar(&o.pgbench, "pgbench", "", "pgbench (default: next to PostgreSQL's server binaries, then PATH)")
	fs.IntVar(&o.clients, "clients", 8, "clients in the concurrent phases (the single-client phase has 1)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each phase")
	fs.DurationVar(&o.soak, "soak", 0, "also run an 8-client phase this long, sampling the server's RSS every 10s (0: off)")
	fs.BoolVar(&o.profile, "profile", false, "take a CPU profile of the headline phase from the server's pprof listener")
	fs.BoolVar(&o.goBench, "go-bench", true, "run the Go micro-benchmarks of the pure parts")
	fs.IntVar(&o.volume, "volume", 0, "also time every page on an empty database and on one filled to this many calls, with a server of its own (0: off; the issue's volume is 1000000)")
	fs.BoolVar(&o.volumeOnly, "volume-only", false, "run only the volume phase (print only)")
	fs.BoolVar(&o.volumeKeep, "volume-keep", false, "leave the volume phase's filled database on the cluster, and print its URL (with -volume-only)")
	fs.BoolVar(&o.mcpOnly, "mcp-only", false, "run only the reads over REST and the MCP phases (print only)")
	fs.StringVar(&o.upstream, "upstream", "", "the benchmark's upstream MCP server's URL, named \"bench\" in the server's policy file (empty: no MCP phases)")
	fs.StringVar(&o.serveUpstream, "serve-upstream", "", "serve the benchmark's upstream MCP server, write its URL to this file, and do nothing else")
	fs.StringVar(&o.doc, "doc", "", "write the report to this file (docs/performance.md)")
	fs.StringVar(&o.command, "command", "make bench", "the command quoted in the report")
	fs.StringVar(&o.revision, "revision", "", "the source revision quoted in the report")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.serveUpstream != "":
		return o, nil
	case o.url == "" && o.serverLog == "":
		return o, errors.New("-url or -server-log is required")
	case o.clients < 1 || o.clients > 256:
		return o, errors.New("-clients must be from 1 to 256")
	case o.duration < time.Second:
		return o, errors.New("-duration must be at least 1s (pgbench counts whole seconds)")
	case o.soak != 0 && o.soak < 30*time.Second:
		return o, errors.New("-soak must be 0 (off) or at least 30s")
	case o.volume != 0 && o.volume < minVolume:
		return o, fmt.Errorf("-volume must be 0 (off) or at least %d calls", minVolume)
	case o.volumeOnly && (o.volume == 0 || o.doc != ""):
		return o, errors.New("-volume-only needs -volume and prints only (no -doc)")
	case o.mcpOnly && (o.upstream == "" || o.doc != "" || o.volumeOnly):
		return o, errors.New("-mcp-only needs -upstream and prints only (no -doc, no -volume-only)")
	case o.volumeKeep && !o.volumeOnly:
		return o, errors.New("-volume-keep needs -volume-only")
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	if o.serveUpstream != "" {
		return serveUpstream(ctx, o.serveUpstream)
	}
	srv, err := waitForServer(ctx, o)
	if err != nil {
		return err
	}
	acct, err := makeAccount(ctx, o.gatehouse)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	m, err := describeMachine(ctx, acct.dbURL)
	if err != nil {
		return err
	}
	if o.volumeOnly {
		fmt.Fprintf(out, "%d cores (%s), %s, %s\n\n", m.Cores, m.CPU, m.Postgres, m.Go)
		v, err := runVolumePhase(ctx, o, acct.dbURL, tmp, out)
		if err != nil {
			return err
		}
		v.printText(out)
		return nil
	}
	fmt.Fprintf(out, "%d cores (%s), %s, %s; %s per phase, %d clients\n\n", m.Cores, m.CPU, m.Postgres, m.Go, o.duration, o.clients)
	if o.mcpOnly {
		b := &bench{base: srv.url, pprof: srv.pprof, dbURL: acct.dbURL, agent: acct.agent, owner: acct.owner, pid: o.serverPID, out: out}
		return b.phases(ctx, o, &report{machine: m, opts: o})
	}

	pgbench, err := findPgbench(o.pgbench)
	if err != nil {
		return err
	}
	bl := &baseline{bin: pgbench, dbURL: acct.dbURL, dir: filepath.Join(tmp, "pgbench")}
	if err := bl.prepare(ctx); err != nil {
		return err
	}
	defer bl.cleanup(context.Background())
	rep := &report{machine: m, opts: o}
	// pgbench runs before the phases and again after them; the ratios use
	// the mean of the two, so a quiet or busy minute of this shared
	// machine does not make the baseline alone.
	runBaselines := func(when string) ([]row, error) {
		var rows []row
		for _, n := range uniq(o.clients, overloadClients(o.clients), 1) {
			r, err := bl.run(ctx, n, o.duration)
			if err != nil {
				return nil, err
			}
			r.Name += " (" + when + ")"
			fmt.Fprintln(out, progress(r))
			rows = append(rows, r)
		}
		return rows, nil
	}
	before, err := runBaselines("before")
	if err != nil {
		return err
	}

	b := &bench{base: srv.url, pprof: srv.pprof, dbURL: acct.dbURL, agent: acct.agent, owner: acct.owner, pid: o.serverPID, out: out}
	if err := b.phases(ctx, o, rep); err != nil {
		return err
	}
	after, err := runBaselines("after")
	if err != nil {
		return err
	}
	rep.baselineRuns = append(before, after...)
	for i := range before {
		rep.baselines = append(rep.baselines, meanBaseline(before[i], after[i]))
	}
	if o.volume > 0 {
		// After pgbench's second run, so the fill's writes do not move the
		// baseline; on a database of its own, so the write phases never
		// saw its rows.
		if rep.volume, err = runVolumePhase(ctx, o, acct.dbURL, tmp, out); err != nil {
			return err
		}
	}
	if o.goBench {
		fmt.Fprintf(out, "Go micro-benchmarks (%s): go test -bench '%s' %s\n", goBenchTime(o.duration), goBenchPattern, strings.Join(goBenchPackages, " "))
		gb, err := runGoBenchmarks(ctx, goBenchTime(o.duration))
		if err != nil {
			return err
		}
		rep.goBench = gb
	}
	fmt.Fprintln(out)
	rep.printText(out)
	if o.doc != "" {
		if err := os.WriteFile(o.doc, rep.markdown(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.doc, err)
		}
		fmt.Fprintf(out, "\nwrote %s\n", o.doc)
	}
	return nil
}

// goBenchTime scales the micro-benchmarks with the phases: 1s each for a
// full run, less for a smoke run.
func goBenchTime(phase time.Duration) time.Duration {
	return min(time.Second, max(100*time.Millisecond, phase/10))
}

func uniq(ns ...int) []int {
	var out []int
	for _, n := range ns {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
