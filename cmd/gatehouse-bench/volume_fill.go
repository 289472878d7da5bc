package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/receipts"
)

// The fill writes copies of the seeded templates (volume_template.go),
// one per event of the plan's timeline, oldest first, in batches of a
// transaction each, chaining their receipts as it goes.

// rationales are what the copies' calls say they are for: the intent page
// searches and counts them.
var rationales = []string{
	"Save the customer's new billing address for the invoice run",
	"Look up the account before answering the support ticket",
	"Record the meeting outcome the user dictated",
	"Check the order status the customer asked about",
	"Update the contact's phone number from the signed form",
	"Read the previous quote to prepare the renewal",
	"Store the draft reply so the user can review it",
	"Fetch the shipping preferences for the pending order",
	"Mark the lead as contacted after the call",
	"Keep the agreed discount on the customer's record",
	"Find the onboarding checklist for the new hire",
	"Note the incident timeline for the postmortem",
	"Send the customer the quote they requested",
	"Confirm the delivery window with the warehouse",
	"Copy the approved budget figures into the plan",
	"Read the vendor's terms before the renewal call",
}

var titles = []string{"Support inbox", "Quarterly renewals", "Onboarding", "Invoices", "Sales follow-ups", "Incident review",
	"Vendor contracts", "Hiring", "Board pack", "Customer migration"}

// cloner writes copies of templates, in batches, chaining their receipts.
type cloner struct {
	pool     *pgxpool.Pool
	rng      *rand.Rand
	n        int // copies made, for keys and titles
	seq      int64
	prevHash []byte
	// evidence ids and receipt positions taken from their identity
	// sequences, not yet used
	evidenceIDs, receiptPositions []int64
	batch                         map[string]*bytes.Buffer
	columns                       map[string][]string // per table, from its first row
	rows                          map[string]int64    // written, per table
	pending                       int                 // copies in the batch
}

func newCloner(ctx context.Context, pool *pgxpool.Pool, workspace uuid.UUID, rng *rand.Rand) (*cloner, error) {
	c := &cloner{pool: pool, rng: rng, batch: map[string]*bytes.Buffer{}, columns: map[string][]string{}, rows: map[string]int64{},
		prevHash: receipts.GenesisHash}
	// The chain continues from its head: the seeded calls' receipts, which
	// the server's sequencer has chained (waitForChain). Nothing else
	// writes a receipt while the fill runs (no calls are made); if
	// something did, the unique (workspace_id, seq) index would fail the
	// fill or the sequencer loudly rather than fork the chain.
	err := pool.QueryRow(ctx, `SELECT seq, hash FROM receipt_links WHERE workspace_id = $1 ORDER BY seq DESC LIMIT 1`, workspace).
		Scan(&c.seq, &c.prevHash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read the chain's head: %w", err)
	}
	return c, nil
}

// clone adds one copy of t at a time to the batch. given maps template
// ids to the values the copy must use (its conversation, or the id the
// conversation it creates must have); optional rows are written when
// withOptional.
func (c *cloner) clone(ctx context.Context, t *template, at time.Time, given map[string]string, withOptional bool) error {
	c.n++
	delta := at.Sub(t.at)
	values := make([]string, len(t.tokens))
	for i, tok := range t.tokens {
		if tok.optional && !withOptional {
			continue
		}
		switch tok.kind {
		case tokID:
			if v, ok := given[tok.text]; ok {
				values[i] = v
			} else {
				values[i] = c.newID(tok.version, at).String()
			}
		case tokTime:
			values[i] = strconv.Quote(tok.at.Add(delta).UTC().Format(time.RFC3339Nano))
		case tokKey:
			values[i] = fmt.Sprintf("k-%d", c.n)
		case tokRationale:
			values[i] = rationales[c.rng.IntN(len(rationales))]
		case tokTitle:
			values[i] = fmt.Sprintf("%s %d", titles[c.rng.IntN(len(titles))], c.n)
		case tokEvidenceID:
			id, err := c.evidenceID(ctx)
			if err != nil {
				return err
			}
			values[i] = strconv.FormatInt(id, 10)
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		if r.optional && !withOptional {
			continue
		}
		b.Reset()
		for i, p := range r.parts {
			b.WriteString(p)
			if i < len(r.slots) {
				b.WriteString(values[r.slots[i]])
			}
		}
		row := []byte(b.String())
		if r.table == "receipts" {
			pos, err := c.receiptPosition(ctx)
			if err != nil {
				return err
			}
			var link []byte
			if row, link, err = c.chain(row, pos); err != nil {
				return fmt.Errorf("template %s: %w", t.name, err)
			}
			if err := c.add("receipt_links", link); err != nil {
				return err
			}
		}
		if err := c.add(r.table, row); err != nil {
			return err
		}
	}
	c.pending++
	return nil
}

// newID is a fresh uuid: time-ordered at the copy's time (UUIDv7, as the
// server makes them for proposals, packets and receipts) or random.
func (c *cloner) newID(version byte, at time.Time) uuid.UUID {
	var id uuid.UUID
	for i := 0; i < len(id); i += 8 {
		v := c.rng.Uint64()
		for j := range 8 {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	if version == 7 {
		ms := uint64(at.UnixMilli())
		for j := range 6 {
			id[j] = byte(ms >> (8 * (5 - j)))
		}
		id[6] = 0x70 | id[6]&0x0f
	} else {
		id[6] = 0x40 | id[6]&0x0f
	}
	id[8] = 0x80 | id[8]&0x3f
	return id
}

// evidenceID takes the next id from the evidence table's identity
// sequence (a thousand at a time).
func (c *cloner) evidenceID(ctx context.Context) (int64, error) {
	return c.nextOf(ctx, &c.evidenceIDs, "evidence", "id")
}

// receiptPosition takes the next position from the receipts' identity
// sequence: the fill chains receipts in position order, as the sequencer
// does.
func (c *cloner) receiptPosition(ctx context.Context) (int64, error) {
	return c.nextOf(ctx, &c.receiptPositions, "receipts", "pos")
}

// nextOf takes the next value of a table's identity column from its
// sequence, drawing a thousand at a time into taken.
func (c *cloner) nextOf(ctx context.Context, taken *[]int64, table, column string) (int64, error) {
	if len(*taken) == 0 {
		rows, err := c.pool.Query(ctx, `SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, 1000)`, table, column)
		if err != nil {
			return 0, fmt.Errorf("%s %s values: %w", table, column, err)
		}
		if *taken, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return 0, fmt.Errorf("%s %s values: %w", table, column, err)
		}
	}
	v := (*taken)[0]
	*taken = (*taken)[1:]
	return v, nil
}

// chain gives a receipt its position, and makes its link: its content
// hash and its place in the chain, as the sequencer does
// (internal/receipts/sequencer.go), chained a moment after it was
// written.
func (c *cloner) chain(row []byte, pos int64) (receipt, link []byte, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(row, &m); err != nil {
		return nil, nil, err
	}
	var id, created string
	if err := json.Unmarshal(m["id"], &id); err != nil {
		return nil, nil, fmt.Errorf("receipt id: %w", err)
	}
	if err := json.Unmarshal(m["created_at"], &created); err != nil {
		return nil, nil, fmt.Errorf("receipt time: %w", err)
	}
	at, err := time.Parse(time.RFC3339Nano, created)
	if err != nil {
		return nil, nil, fmt.Errorf("receipt time: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(m["content"]), []byte("null")) {
		return nil, nil, fmt.Errorf("receipt %s has no content to hash", id)
	}
	contentHash, err := receipts.ContentHash(m["content"])
	if err != nil {
		return nil, nil, err
	}
	seq := c.seq + 1
	hash, err := receipts.ChainHash(id, seq, c.prevHash, contentHash, m["metadata"])
	if err != nil {
		return nil, nil, err
	}
	bytea := func(b []byte) string { return `\x` + hex.EncodeToString(b) }
	m["pos"] = json.RawMessage(strconv.FormatInt(pos, 10))
	if receipt, err = json.Marshal(m); err != nil {
		return nil, nil, err
	}
	link, err = json.Marshal(map[string]any{"workspace_id": m["workspace_id"], "seq": seq, "receipt_id": id, "receipt_pos": pos,
		"prev_hash": bytea(c.prevHash), "hash": bytea(hash), "content_hash": bytea(contentHash),
		"chained_at": at.Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return nil, nil, err
	}
	c.seq, c.prevHash = seq, hash
	return receipt, link, nil
}

// add appends a row to its table's batch (a JSON array).
func (c *cloner) add(table string, row []byte) error {
	buf := c.batch[table]
	if buf == nil {
		buf = &bytes.Buffer{}
		c.batch[table] = buf
		if c.columns[table] == nil {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(row, &m); err != nil {
				return fmt.Errorf("%s row: %w", table, err)
			}
			c.columns[table] = slices.Sorted(maps.Keys(m))
		}
	}
	if buf.Len() == 0 {
		buf.WriteByte('[')
	} else {
		buf.WriteByte(',')
	}
	buf.Write(row)
	c.rows[table]++
	return nil
}

// batchBytes is how much the batch holds.
func (c *cloner) batchBytes() int {
	n := 0
	for _, b := range c.batch {
		n += b.Len()
	}
	return n
}

// flush writes the batch, one statement per table, in one transaction.
func (c *cloner) flush(ctx context.Context) error {
	if c.pending == 0 {
		return nil
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, table := range flushTables() {
		buf := c.batch[table]
		if buf == nil || buf.Len() == 0 {
			continue
		}
		buf.WriteByte(']')
		cols := make([]string, len(c.columns[table]))
		for i, col := range c.columns[table] {
			cols[i] = pgx.Identifier{col}.Sanitize()
		}
		overriding := ""
		if table == "evidence" {
			overriding = "OVERRIDING SYSTEM VALUE" // ids taken from its sequence (evidenceID)
		}
		list := strings.Join(cols, ", ")
		sql := fmt.Sprintf("INSERT INTO %s (%s) %s SELECT %s FROM jsonb_populate_recordset(NULL::%s, $1::jsonb)", table, list, overriding, list, table)
		if _, err := tx.Exec(ctx, sql, json.RawMessage(buf.Bytes())); err != nil {
			return fmt.Errorf("fill %s: %w", table, err)
		}
		buf.Reset()
	}
	c.pending = 0
	return tx.Commit(ctx)
}

// flushTables are the tables a batch writes, in order: the templates'
// and the receipts' links, which the fill makes itself (chain).
func flushTables() []string {
	var out []string
	for _, t := range fillTables {
		out = append(out, t.name)
		if t.name == "receipts" {
			out = append(out, "receipt_links")
		}
	}
	return out
}

// fillResult is what the fill wrote and how long it took.
type fillResult struct {
	Calls  int
	Rows   map[string]int64 // per table
	Took   time.Duration    // writing the rows
	Vacuum time.Duration    // VACUUM (ANALYZE) of the tables afterwards
}

// fillBatch is how many copies one transaction writes.
const fillBatch = 1000

// fillVolume writes the plan's events as copies of the seeded templates,
// oldest first, then vacuums and analyzes the tables, as a database that
// has lived for months has been (the visibility map set, statistics
// current). progress is told every tenth of the way.
func fillVolume(ctx context.Context, pool *pgxpool.Pool, s *seeded, plan volumePlan, now time.Time, progress func(done, total int)) (fillResult, error) {
	start := time.Now()
	rng := rand.New(rand.NewPCG(fillRandomState, 0))
	events := plan.timeline(now, rng)
	markEvidence(events, plan.Evidence, func(e fillEvent) int { return s.template(e).evidenceRows(false) },
		func(e fillEvent) int { return s.template(e).evidenceRows(true) - s.template(e).evidenceRows(false) }, rng)
	c, err := newCloner(ctx, pool, s.workspace, rng)
	if err != nil {
		return fillResult{}, err
	}
	convs := make([]string, plan.Conversations)
	convs[0], convs[1] = s.hot.String(), s.small.String()
	for i := 2; i < len(convs); i++ {
		convs[i] = c.newID(4, now).String()
	}
	// A copy of a call made in the hot (auto-mode) or the small
	// (approve-mode) conversation is given its own conversation.
	given := map[bool]map[string]string{false: {s.hot.String(): ""}, true: {s.small.String(): ""}}
	res := fillResult{}
	step := max(1, len(events)/10)
	for i, e := range events {
		at := time.Unix(0, e.at)
		switch e.kind {
		case kindNotebook, kindFeedback:
			err = c.clone(ctx, s.template(e), at, nil, false)
		default: // a conversation, or a call in one
			g := given[approveMode(int(e.conv))]
			for k := range g {
				g[k] = convs[e.conv]
			}
			err = c.clone(ctx, s.template(e), at, g, e.evidence)
			if e.kind.isCall() {
				res.Calls++
			}
		}
		if err != nil {
			return res, err
		}
		if c.pending >= fillBatch || c.batchBytes() > 16<<20 {
			if err := c.flush(ctx); err != nil {
				return res, err
			}
		}
		if progress != nil && (i+1)%step == 0 {
			progress(i+1, len(events))
		}
	}
	if err := c.flush(ctx); err != nil {
		return res, err
	}
	res.Rows, res.Took = c.rows, time.Since(start)
	start = time.Now()
	for _, t := range fillTables {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+t.name); err != nil {
			return res, fmt.Errorf("vacuum %s: %w", t.name, err)
		}
	}
	res.Vacuum = time.Since(start)
	return res, nil
}

// template is the template an event copies.
func (s *seeded) template(e fillEvent) *template {
	switch e.kind {
	case kindConversation:
		return s.conversation[approveMode(int(e.conv))]
	case kindNotebook:
		return s.notebook
	case kindFeedback:
		return s.feedback
	}
	approve, kind := approveMode(int(e.conv)), e.kind
	switch {
	case kind == kindRefused && approve: // the seeded refusal is in auto mode (timeline makes none in approve mode)
		kind = kindRead
	case kind == kindCard && !approve:
		kind = kindWrite
	}
	return s.calls[callKind{kind, approve}]
}

// evidenceRows is how many evidence rows a copy writes.
func (t *template) evidenceRows(withOptional bool) int {
	n := 0
	for _, r := range t.rows {
		if r.table == "evidence" && (withOptional || !r.optional) {
			n++
		}
	}
	return n
}
