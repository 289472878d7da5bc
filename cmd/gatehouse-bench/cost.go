package main

import (
	"context"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// cost is what a phase cost, read before and after it: the cluster's WAL
// (pg_stat_wal: every durable change, the sequencer's and vacuum's
// included) and the server process's CPU time. Divided by the calls, these
// do not depend on how busy the machine was, unlike calls/s: they say how
// much work a call is, where the ratios say how fast the machine did it.
type cost struct {
	walRecords, walBytes int64
	serverCPU            float64 // seconds (user + system)
	ok                   bool
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
	if err := conn.QueryRow(ctx, "SELECT wal_records, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint FROM pg_stat_wal").Scan(&c.walRecords, &c.walBytes); err != nil {
		return c
	}
	c.serverCPU = cpuSeconds(pid)
	c.ok = true
	return c
}

// perCall is the cost of one call between two readings.
func perCall(before, after cost, calls int) (walRecords, walBytes, cpuMs float64, ok bool) {
	if !before.ok || !after.ok || calls == 0 {
		return 0, 0, 0, false
	}
	n := float64(calls)
	return float64(after.walRecords-before.walRecords) / n, float64(after.walBytes-before.walBytes) / n,
		1000 * (after.serverCPU - before.serverCPU) / n, true
}

// cpuSeconds is a process's user + system CPU time from /proc (Linux), 0
// when it cannot be read.
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command may contain spaces: fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux the harness runs on.
const clockTicks = 100
