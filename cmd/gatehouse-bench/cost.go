package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// cost is what a phase cost, read before and after it: the cluster's WAL
// (pg_stat_wal: every durable change, the sequencer's and vacuum's
// included), the server process's CPU time and the cluster's. Divided by
// the calls, these depend far less on how busy the machine was than
// calls/s: they say how much work a call is, where the ratios say how
// fast the machine did it.
type cost struct {
	walRecords, walBytes int64
	// lsn is the WAL insert position (for walShares).
	lsn       string
	serverCPU float64 // seconds (user + system)
	// clusterCPU is every PostgreSQL process's CPU time (seconds): the
	// postmaster's, its exited children's and its running children's
	// (backends, the WAL writer, autovacuum...).
	clusterCPU float64
	ok         bool
}

// costNow reads the counters; a counter it cannot read leaves ok false and
// the report prints "-".
func costNow(ctx context.Context, dbURL string, pid int) cost {
	var c cost
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return c
	}
	defer conn.Close(ctx)
	// Bytes from the insert position (exact); records from pg_stat_wal,
	// which backends report at most a second late (over a phase of
	// seconds, a small error).
	var backend int
	if err := conn.QueryRow(ctx, "SELECT wal_records, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint, pg_current_wal_insert_lsn()::text, pg_backend_pid() FROM pg_stat_wal").
		Scan(&c.walRecords, &c.walBytes, &c.lsn, &backend); err != nil {
		return c
	}
	c.serverCPU = cpuSeconds(pid)
	c.clusterCPU = clusterCPUSeconds("/proc", backend)
	c.ok = true
	return c
}

// callCost is a phase's cost per call (ok false: not measured).
type callCost struct {
	WALRecords, WALBytes float64
	// ServerMs and ClusterMs are the server's and PostgreSQL's CPU
	// milliseconds (0: that process could not be read).
	ServerMs, ClusterMs float64
	OK                  bool
}

// perCall is the cost of one call between two readings.
func perCall(before, after cost, calls int) callCost {
	if !before.ok || !after.ok || calls == 0 {
		return callCost{}
	}
	n := float64(calls)
	c := callCost{WALRecords: float64(after.walRecords-before.walRecords) / n, WALBytes: float64(after.walBytes-before.walBytes) / n,
		ServerMs: 1000 * (after.serverCPU - before.serverCPU) / n, OK: true}
	if before.clusterCPU > 0 && after.clusterCPU > 0 {
		c.ClusterMs = 1000 * (after.clusterCPU - before.clusterCPU) / n
	}
	return c
}

// procStat is the fields of /proc/<pid>/stat after the command (which
// may contain spaces: they start after the last ')'): f[0] is the state,
// f[1] the parent's pid, f[11] to f[14] utime, stime, cutime and cstime.
func procStat(proc string, pid int) []string {
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil
	}
	return f
}

// ticks sums stat fields given in clock ticks, as seconds.
func ticks(f []string, fields ...int) float64 {
	sum := 0.0
	for _, i := range fields {
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum / clockTicks
}

// cpuSeconds is a process's user + system CPU time from /proc (Linux), 0
// when it cannot be read.
func cpuSeconds(pid int) float64 {
	f := procStat("/proc", pid)
	if f == nil {
		return 0
	}
	return ticks(f, 11, 12)
}

// clusterCPUSeconds is the CPU time of the PostgreSQL cluster a backend
// belongs to: its postmaster (the backend's parent), the children the
// postmaster has reaped (cutime, cstime: backends of closed connections,
// pgbench's among them) and the children still running. A child that
// exits between two readings is among the running children in the first
// and in the postmaster's reaped time in the second, so the difference
// counts it once. 0 when the cluster is not on this
// machine's /proc (a remote DATABASE_URL).
func clusterCPUSeconds(proc string, backend int) float64 {
	b := procStat(proc, backend)
	if b == nil {
		return 0
	}
	postmaster, _ := strconv.Atoi(b[1])
	pm := procStat(proc, postmaster)
	if pm == nil {
		return 0
	}
	total := ticks(pm, 11, 12, 13, 14)
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0
	}
	parent := strconv.Itoa(postmaster)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(proc, pid); f != nil && f[1] == parent {
			total += ticks(f, 11, 12)
		}
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux the harness runs on.
const clockTicks = 100
