package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// walShares finds the WAL a range of inserts wrote, per call, by the
// table and index it went to; the report lists it under the headline.
func TestWALShares_NamesTheRelationsACallWrote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.MustURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE wal_probe (id bigint PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	walSharesErr = func(err error) { t.Log(err) }
	before := costNow(ctx, url, 0)
	for i := range 40 {
		if _, err := conn.Exec(ctx, `INSERT INTO wal_probe VALUES ($1, 'x')`, i); err != nil {
			t.Fatal(err)
		}
	}
	after := costNow(ctx, url, 0)
	shares := walShares(ctx, url, before.lsn, after.lsn, 40, 10000)
	if len(shares) == 0 {
		t.Fatal("no WAL shares")
	}
	found := map[string]float64{}
	for _, s := range shares {
		found[s.Relation+" "+s.Kind] += s.Records
	}
	// (Other tests write to the cluster at the same time: every share is
	// read, and each insert wrote one heap and one index record.)
	if found["wal_probe Heap INSERT"]+found["wal_probe Heap INSERT+INIT"] < 0.99 || found["wal_probe_pkey Btree INSERT_LEAF"] < 0.9 {
		t.Fatalf("shares %+v; want a heap insert and an index insert per call in wal_probe", found)
	}

	var md bytes.Buffer
	walSharesMarkdown(&md, row{Name: "probe", Calls: 40, WAL: shares, Cost: callCost{WALRecords: 3}})
	if !strings.Contains(md.String(), "| `wal_probe` | Heap INSERT") || !strings.Contains(md.String(), "### Where a call's WAL goes (probe)") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}
