package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// walShare is one relation's part of a phase's WAL, per call: which
// table or index (or "-" for records of no relation: commits, the
// sequencer's and the roll-up's transactions...), of which kind of
// record, how many and how large.
type walShare struct {
	Relation, Kind string
	Records, Bytes float64
}

// walSharesLimit is how many of the largest shares a report lists.
const walSharesLimit = 30

// walShares reads the WAL written between two insert positions with
// pg_walinspect (PostgreSQL 15's contrib; the bench's cluster is its
// own, and its user a superuser) and divides it by the calls, grouped by
// relation and record type: what a call writes, and where. nil when the
// extension is not there or the range was recycled.
func walShares(ctx context.Context, dbURL, from, to string, calls, limit int) []walShare {
	if from == "" || to == "" || calls == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
		walSharesErr(err)
		return nil
	}
	// pg_walinspect reads only flushed WAL; the WAL writer flushes within
	// wal_writer_delay (200 ms) when commits do not.
	for range 50 {
		var flushed bool
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", to).Scan(&flushed); err != nil {
			walSharesErr(err)
			return nil
		}
		if flushed {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A record's first block names its relation by file node
	// ("blkref #0: rel 1663/16384/16421 fork main blk 0").
	rows, err := conn.Query(ctx, `
		SELECT coalesce(c.relname, '-'), w.resource_manager || ' ' || w.record_type,
		       count(*)::float8 / $3, sum(w.record_length)::float8 / $3
		FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) w
		LEFT JOIN pg_class c ON c.relfilenode = (regexp_match(w.block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid AND c.relfilenode <> 0
		GROUP BY 1, 2
		ORDER BY 3 DESC, 1, 2
		LIMIT $4`, from, to, float64(calls), limit)
	if err != nil {
		walSharesErr(err)
		return nil
	}
	shares, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (walShare, error) {
		var s walShare
		err := r.Scan(&s.Relation, &s.Kind, &s.Records, &s.Bytes)
		return s, err
	})
	if err != nil {
		walSharesErr(err)
		return nil
	}
	return shares
}

// walSharesMarkdown is the headline phase's WAL by relation, for
// docs/performance.md.
func walSharesMarkdown(b *bytes.Buffer, r row) {
	if len(r.WAL) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Where a call's WAL goes (%s)\n\n", r.Name)
	fmt.Fprintf(b, "Every WAL record the cluster wrote during the phase (pg_walinspect), by relation and record type, divided by its %d calls; "+
		"the sequencer's, the roll-up's and autovacuum's included. The %d largest shares:\n\n", r.Calls, walSharesLimit)
	b.WriteString("| relation | record | records per call | bytes per call |\n|---|---|---:|---:|\n")
	total := 0.0
	for _, s := range r.WAL {
		total += s.Records
		fmt.Fprintf(b, "| `%s` | %s | %.2f | %.0f |\n", s.Relation, s.Kind, s.Records, s.Bytes)
	}
	fmt.Fprintf(b, "\nThese rows add up to %.1f of the phase's %.1f records per call.\n", total, r.Cost.WALRecords)
}

// walSharesErr is where walShares says why it found nothing (a test sets
// it; the bench prints "-" rows without them).
var walSharesErr = func(error) {}
