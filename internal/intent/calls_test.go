package intent

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The median read from a histogram is within a bucket's reach of the
// exact one, and a bucket's bounds are the SQL function's.
func TestMedianSeconds_WithinItsBucket(t *testing.T) {
	t.Parallel()
	if m := MedianSeconds(nil); m != 0 {
		t.Errorf("no decisions: %v", m)
	}
	for _, c := range []struct {
		name    string
		seconds []float64
	}{
		{"one", []float64{42}},
		{"under a second", []float64{0.2, 0.4, 0.9}},
		{"spread", []float64{3, 10, 45, 60, 120, 600, 3600}},
		{"even count", []float64{5, 7, 100, 1000}},
		{"days", []float64{86400, 2 * 86400, 3 * 86400}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hist []int64
			for _, s := range c.seconds {
				b := goBucket(s)
				for len(hist) <= b {
					hist = append(hist, 0)
				}
				hist[b]++
			}
			sorted := slices.Sorted(slices.Values(c.seconds))
			exact := sorted[len(sorted)/2]
			if len(sorted)%2 == 0 {
				exact = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
			}
			got := MedianSeconds(hist)
			lo, _ := DecisionBucket(goBucket(min(exact, got)))
			_, hi := DecisionBucket(goBucket(max(exact, got)))
			if got < lo || got > hi || (exact >= 1 && math.Abs(got-exact)/exact > 0.2) {
				t.Errorf("median %v, exact %v", got, exact)
			}
		})
	}
}

// goBucket mirrors gatehouse_decision_bucket (checked against it below).
func goBucket(s float64) int {
	if s < 1 {
		return 0
	}
	return min(127, 1+int(math.Floor(4*math.Log(s)/math.Ln2)))
}

func TestDecisionBucket_IsTheSQLFunctionsBucket(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	for _, s := range []float64{0, 0.5, 0.999, 1, 1.1, 1.5, 2.5, 59, 61, 3599, 3601, 86400, 1e7, 1e12} {
		var b int
		if err := pool.QueryRow(context.Background(), `SELECT gatehouse_decision_bucket($1)`, s).Scan(&b); err != nil {
			t.Fatal(err)
		}
		lo, hi := DecisionBucket(b)
		if s < lo || (s >= hi && b != 127) {
			t.Errorf("%v s is in bucket %d, which holds [%v, %v)", s, b, lo, hi)
		}
	}
}

// callWorld is a workspace whose calls a test writes as the proposals
// service does: a proposal and its audit rows, and an audit row naming the
// call (or its approval packet) with each change.
type callWorld struct {
	pool   *pgxpool.Pool
	ws     uuid.UUID
	owners []uuid.UUID
	convs  []uuid.UUID
	mu     sync.Mutex
	open   []openCall // calls not finished
	start  time.Time
	// silent counts the changes written with no audit row.
	silent int
}

type openCall struct {
	id, approval uuid.UUID
	status       string
	created      time.Time
}

func newCallWorld(t *testing.T, pool *pgxpool.Pool, slug string) *callWorld {
	t.Helper()
	w := &callWorld{pool: pool, start: time.Now().UTC()}
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&w.ws); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		var u, c uuid.UUID
		if err := pool.QueryRow(ctx, `
			WITH u AS (INSERT INTO users (email, password_hash) VALUES ($2 || '@example.com', 'x') RETURNING id)
			INSERT INTO conversations (workspace_id, owner_id, title) SELECT $1, u.id, 'c' FROM u RETURNING owner_id, id`,
			w.ws, fmt.Sprintf("%s-%d", slug, i)).Scan(&u, &c); err != nil {
			t.Fatal(err)
		}
		w.owners, w.convs = append(w.owners, u), append(w.convs, c)
	}
	return w
}

var (
	worldClasses = []string{"records.write", "email.send.external", ""}
	worldTools   = []string{"records.put", "email.send"}
)

// step writes one random thing that happens to calls, in its own
// transaction (which sleeps a little, so concurrent ones commit out of
// order).
func (w *callWorld) step(ctx context.Context, rng *rand.Rand) error {
	var committed []openCall // calls not finished, to follow once committed
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		defer time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		switch n := rng.IntN(10); {
		case n < 5:
			c, err := w.create(ctx, tx, rng)
			if c != nil {
				committed = append(committed, *c)
			}
			return err
		case n < 6:
			class, tool := worldClasses[rng.IntN(len(worldClasses))], worldTools[rng.IntN(len(worldTools))]
			_, err := tx.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at)
				VALUES ($1, 'agent', 'proposal.refused', 'tool', $3, jsonb_build_object('tool', $3::text, 'action_class', $2::text, 'rationale', 'refused',
				        'rationale_warning', $4::boolean), $5)`,
				w.ws, class, tool, rng.IntN(3) == 0, w.start.Add(-time.Duration(rng.IntN(40*24))*time.Hour))
			return err
		default:
			c, err := w.change(ctx, tx, rng)
			if c != nil {
				committed = append(committed, *c)
			}
			return err
		}
	})
	w.mu.Lock()
	w.open = append(w.open, committed...)
	w.mu.Unlock()
	return err
}

// create proposes a call (backdated up to 40 days, as a fill or a
// migrated history may be), finished or not.
func (w *callWorld) create(ctx context.Context, tx pgx.Tx, rng *rand.Rand) (*openCall, error) {
	o := rng.IntN(len(w.owners))
	class, tool := worldClasses[rng.IntN(len(worldClasses))], worldTools[rng.IntN(len(worldTools))]
	created := w.start.Add(-time.Duration(rng.IntN(40*24*60)) * time.Minute)
	status := []string{"applied", "applied", "failed", "pending", "pending_approval", "applying"}[rng.IntN(6)]
	var path, resolver any
	var claimed, resolved *time.Time
	var applied any
	switch status {
	case "applied", "failed":
		path = "auto"
		at := created.Add(time.Second)
		claimed, resolved = &at, &at
	case "applying":
		path, resolver = "human", w.owners[o]
		at := created.Add(time.Duration(rng.IntN(5000)) * time.Second)
		claimed = &at
		if rng.IntN(2) == 0 {
			applied = `{"edited": true}`
		}
	case "pending_approval":
		if rng.IntN(2) == 0 {
			applied = `{"edited": true}`
		}
	}
	var nullClass any
	if class != "" {
		nullClass = class
	}
	var id uuid.UUID
	if err := tx.QueryRow(ctx, `
		INSERT INTO proposals (workspace_id, owner_id, conversation_id, proposed_by_user_id, proposed_by_kind, tool, effect, arguments, rationale,
		                       permission_mode, disposition, action_class, status, apply_path, resolved_by_user_id, claimed_at, resolved_at,
		                       applied_arguments, created_at)
		VALUES ($1, $2, $3, $2, 'agent', $4, 'mutate', '{}', 'a call of the world', 'approve', 'propose', $5, $6, $7, $8, $9, $10, $11, $12)
		RETURNING id`, w.ws, w.owners[o], w.convs[o], tool, nullClass, status, path, resolver, claimed, resolved, applied, created).Scan(&id); err != nil {
		return nil, err
	}
	// A call that ran at once writes one row, the finished one, saying
	// what the created row would (it names its scope); before, it wrote
	// both. Both shapes are in a database's history.
	action := "proposal.created"
	if path == "auto" && rng.IntN(2) == 0 {
		action = "proposal." + status
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data, created_at)
		VALUES ($1, 'agent', $7, 'proposal', $2::text, jsonb_build_object('tool', $3::text, 'action_class', $4::text,
		        'rationale_warning', $5::boolean, 'scope', 'conversation', 'path', 'auto'), $6)`, w.ws, id, tool, class, rng.IntN(4) == 0, created, action); err != nil {
		return nil, err
	}
	c := openCall{id: id, status: status, created: created}
	if status == "pending_approval" {
		if err := tx.QueryRow(ctx, `INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, expires_at)
			VALUES ($1, $2, 'a packet', 'approver', now() + interval '1 day') RETURNING id`, w.ws, id).Scan(&c.approval); err != nil {
			return nil, err
		}
	}
	if status == "pending" || status == "pending_approval" || status == "applying" {
		return &c, nil
	}
	return nil, nil
}

// change moves an unfinished call on: the owner rejects, confirms (maybe
// edited) or escalates it; an approver approves or rejects it, or it
// expires; a claim finishes. One change in five writes no audit row (the
// roll-up's sweep finds it).
func (w *callWorld) change(ctx context.Context, tx pgx.Tx, rng *rand.Rand) (*openCall, error) {
	w.mu.Lock()
	if len(w.open) == 0 {
		w.mu.Unlock()
		return nil, nil
	}
	i := rng.IntN(len(w.open))
	c := w.open[i]
	w.open = slices.Delete(w.open, i, i+1)
	w.mu.Unlock()
	// Serialise with any other change of the same call, as FOR UPDATE does.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM proposals WHERE id = $1 FOR UPDATE`, c.id); err != nil {
		return nil, err
	}
	at := c.created.Add(time.Duration(1+rng.IntN(20000)) * time.Second)
	user := w.owners[0]
	var set, action, subjectType, subject string
	next := ""
	switch c.status {
	case "pending":
		switch rng.IntN(3) {
		case 0:
			set, action = `status = 'rejected', resolved_by_user_id = $2, resolved_at = $3`, "proposal.rejected"
		case 1:
			set, action, next = `status = 'applying', resolved_by_user_id = $2, claimed_at = $3, apply_path = 'human', applied_arguments = CASE WHEN random() < 0.5 THEN '{"e": 1}'::jsonb END`, "proposal.edited", "applying"
		default:
			set, action, next = `status = 'pending_approval', applied_arguments = '{"e": 2}'`, "proposal.escalated", "pending_approval"
			if err := tx.QueryRow(ctx, `INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, expires_at)
				VALUES ($1, $2, 'a packet', 'approver', now() + interval '1 day') RETURNING id`, w.ws, c.id).Scan(&c.approval); err != nil {
				return nil, err
			}
		}
		subjectType, subject = "proposal", c.id.String()
	case "pending_approval":
		switch rng.IntN(3) {
		case 0:
			set, action, next = `status = 'applying', resolved_by_user_id = $2, claimed_at = $3, apply_path = 'approval'`, "approval.approved", "applying"
		case 1:
			set, action = `status = 'rejected', resolved_by_user_id = $2, resolved_at = $3`, "approval.rejected"
		default:
			set, action = `status = 'expired', resolved_at = $3`, "approval.expired"
		}
		subjectType, subject = "approval", c.approval.String()
	case "applying":
		set, action = `status = CASE WHEN random() < 0.8 THEN 'applied' ELSE 'failed' END, resolved_at = $3`, "proposal.applied"
		subjectType, subject = "proposal", c.id.String()
	}
	if _, err := tx.Exec(ctx, `UPDATE proposals SET `+set+` WHERE id = $1 AND ($2::uuid IS NOT NULL) AND ($3::timestamptz IS NOT NULL)`, c.id, user, at); err != nil {
		return nil, err
	}
	if rng.IntN(5) != 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data)
			VALUES ($1, 'user', $2, $3, $4, '{}')`, w.ws, action, subjectType, subject); err != nil {
			return nil, err
		}
	} else {
		w.mu.Lock()
		w.silent++
		w.mu.Unlock()
	}
	if next != "" {
		c.status = next
		return &c, nil
	}
	return nil, nil
}

// directDays counts every call of ws from the rows themselves.
func directDays(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) (map[DayKey]Counts, map[time.Time]int64) {
	t.Helper()
	rows, err := pool.Query(ctx, `
		WITH c AS (
			SELECT day, action_class, tool, refused::int AS refused, edited::int AS edited, decided::int AS decided,
			       CASE WHEN decided THEN array_fill(0, ARRAY[decision_bucket]) || 1 ELSE '{}' END AS hist
			FROM proposal_call_facts WHERE workspace_id = $1
			UNION ALL
			SELECT (created_at AT TIME ZONE 'UTC')::date, coalesce(data->>'action_class', ''), coalesce(data->>'tool', ''), 1, 0, 0, '{}'
			FROM audit_events WHERE workspace_id = $1 AND action = 'proposal.refused'
		)
		SELECT day, action_class, tool, count(*), sum(refused), sum(edited), sum(decided), gatehouse_hist_sum(hist)
		FROM c GROUP BY 1, 2, 3`, ws)
	if err != nil {
		t.Fatal(err)
	}
	out := map[DayKey]Counts{}
	for rows.Next() {
		var d time.Time
		var k DayKey
		var c Counts
		var hist []int32
		if err := rows.Scan(&d, &k.Class, &k.Tool, &c.Calls, &c.Refused, &c.Edited, &c.Decisions, &hist); err != nil {
			t.Fatal(err)
		}
		k.Workspace, k.Day = ws, utcDay(d)
		for _, n := range hist {
			c.Hist = append(c.Hist, int64(n))
		}
		out[k] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	warned := map[time.Time]int64{}
	wr, err := pool.Query(ctx, `SELECT (created_at AT TIME ZONE 'UTC')::date, count(*) FROM audit_events
		WHERE workspace_id = $1 AND (action IN ('proposal.created', 'proposal.refused') OR action IN ('proposal.applied', 'proposal.failed') AND data ? 'scope')
		  AND (data->>'rationale_warning')::boolean GROUP BY 1`, ws)
	if err != nil {
		t.Fatal(err)
	}
	for wr.Next() {
		var d time.Time
		var n int64
		if err := wr.Scan(&d, &n); err != nil {
			t.Fatal(err)
		}
		warned[utcDay(d)] = n
	}
	return out, warned
}

// read is what the pages read of ws's calls, in one snapshot each.
type read struct {
	days      Days
	decisions map[string]Decisions
}

// readDays reads ws's calls as the pages do: in one snapshot.
func readDays(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) read {
	t.Helper()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	from, to := time.Now().AddDate(0, 0, -60), time.Now().AddDate(0, 0, 2)
	d, err := ReadDays(ctx, db.New(tx), ws, from, to)
	if err != nil {
		t.Fatal(err)
	}
	decisions, behind, err := ReadDecisions(ctx, db.New(tx), ws, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if d.Updating || behind {
		t.Fatal("updating: the tail is longer than a read adds")
	}
	return read{days: d, decisions: decisions}
}

func trimHist(h []int64) []int64 {
	for len(h) > 0 && h[len(h)-1] == 0 {
		h = h[:len(h)-1]
	}
	return h
}

func equalDays(t *testing.T, when string, got read, want map[DayKey]Counts, wantWarned map[time.Time]int64) {
	t.Helper()
	warned := map[time.Time]int64{}
	for k, c := range got.days.Counts {
		if c.Warned != 0 {
			warned[k.Day] += c.Warned
		}
		c.Warned = 0
		w := want[k]
		w.Hist = nil
		if c.zero() && w.zero() {
			continue
		}
		if len(c.Hist) != 0 || c.Calls != w.Calls || c.Refused != w.Refused || c.Edited != w.Edited || c.Decisions != w.Decisions {
			t.Fatalf("%s: %s %q %q counts %+v, want %+v", when, k.Day.Format(time.DateOnly), k.Class, k.Tool, c, w)
		}
	}
	wantDecisions := map[string]Decisions{}
	for k, w := range want {
		if c, ok := got.days.Counts[k]; !ok && !w.zero() {
			t.Fatalf("%s: %s %q %q is missing, want %+v", when, k.Day.Format(time.DateOnly), k.Class, k.Tool, w)
		} else if ok && c.Decisions != w.Decisions {
			t.Fatalf("%s: %s %q %q decisions %d, want %d", when, k.Day.Format(time.DateOnly), k.Class, k.Tool, c.Decisions, w.Decisions)
		}
		if k.Class == "" || w.Decisions == 0 {
			continue
		}
		d := wantDecisions[k.Class]
		for len(d.Hist) < len(w.Hist) {
			d.Hist = append(d.Hist, 0)
		}
		for b, n := range w.Hist {
			d.Hist[b] += n
		}
		d.Count += w.Decisions
		wantDecisions[k.Class] = d
	}
	if len(got.decisions) != len(wantDecisions) {
		t.Fatalf("%s: decisions %+v, want %+v", when, got.decisions, wantDecisions)
	}
	for class, w := range wantDecisions {
		g := got.decisions[class]
		if g.Count != w.Count || !slices.Equal(trimHist(g.Hist), trimHist(w.Hist)) {
			t.Fatalf("%s: %s decisions %+v, want %+v", when, class, g, w)
		}
	}
	for d, n := range wantWarned {
		if warned[d] != n {
			t.Fatalf("%s: %s has %d warnings, want %d", when, d.Format(time.DateOnly), warned[d], n)
		}
	}
	if len(warned) != len(wantWarned) {
		t.Fatalf("%s: warnings on %v, want %v", when, warned, wantWarned)
	}
}

func callsFeedState(t *testing.T, ctx context.Context, pool *pgxpool.Pool) db.RollupFeed {
	t.Helper()
	f, err := db.New(pool).GetRollupFeed(ctx, FeedName)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// catchUp runs the roll-up until it has folded every audit row.
func catchUp(t *testing.T, ctx context.Context, s *Service) {
	t.Helper()
	for range 1000 {
		head, err := db.New(s.pool).AuditHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if callsFeedState(t, ctx, s.pool).FoldedTo == head {
			return
		}
		if _, err := s.RollUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the roll-up does not catch up")
}

// The calls' days read from call_days plus the unfolded audit rows equal
// the counts of every call as it is now, whatever batches the roll-up
// folded the audit log in and wherever it stands: random calls (created
// backdated, finished or not), refusals at the gate and changes of
// unfinished calls, some with no audit row (which the sweep finds).
func TestCallDays_EqualEveryCallWhateverTheBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	s := NewService(pool)
	s.sweepEvery = 0 // on every turn
	for seed := range uint64(3) {
		w := newCallWorld(t, pool, fmt.Sprintf("days-%d", seed))
		rng := rand.New(rand.NewPCG(seed, 30))
		for round := range 10 {
			for range rng.IntN(60) {
				if err := w.step(ctx, rng); err != nil {
					t.Fatal(err)
				}
			}
			// At least one turn: it sweeps the unfinished calls.
			for range 1 + rng.IntN(3) {
				if _, err := rollup.Advance(ctx, pool, s.feed(int32(1+rng.IntN(25)))); err != nil {
					t.Fatal(err)
				}
			}
			want, warned := directDays(t, ctx, pool, w.ws)
			equalDays(t, fmt.Sprintf("seed %d round %d (watermark %d)", seed, round, callsFeedState(t, ctx, pool).FoldedTo),
				readDays(t, ctx, pool, w.ws), want, warned)
		}
		catchUp(t, ctx, s)
		if _, err := s.RollUp(ctx); err != nil { // and a sweep
			t.Fatal(err)
		}
		want, warned := directDays(t, ctx, pool, w.ws)
		equalDays(t, fmt.Sprintf("seed %d caught up", seed), readDays(t, ctx, pool, w.ws), want, warned)
		// Folded, the days are call_days alone; and every unfinished call
		// is remembered, no finished one.
		var open, remembered int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM proposal_call_facts WHERE workspace_id = $1 AND open),
			(SELECT count(*) FROM call_days_open WHERE workspace_id = $1)`, w.ws).Scan(&open, &remembered); err != nil || open != remembered {
			t.Fatalf("seed %d: %d unfinished calls, %d remembered (%v)", seed, open, remembered, err)
		}
		if w.silent == 0 {
			t.Fatalf("seed %d: no change went unaudited; the sweep was not tried", seed)
		}
	}
}

// Two workers (two instances) take turns while calls are made and
// changed concurrently, committing out of order: every call is counted
// once.
func TestCallRollUp_TwoWorkersCountEachCallOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.MustPool(t)
	w := newCallWorld(t, pool, "two-workers")
	var writers, workers sync.WaitGroup
	for i := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 4))
			for range 40 {
				if err := w.step(ctx, rng); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	services := []*Service{NewService(pool), NewService(pool)}
	for _, s := range services {
		s.sweepEvery = 0
	}
	for i, s := range services {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := rollup.Advance(ctx, pool, s.feed(int32(1+rng.IntN(10)))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(done)
	workers.Wait()
	catchUp(t, ctx, services[0])
	if _, err := services[0].RollUp(ctx); err != nil { // and a sweep
		t.Fatal(err)
	}
	want, warned := directDays(t, ctx, pool, w.ws)
	equalDays(t, "after both", readDays(t, ctx, pool, w.ws), want, warned)
	var folded, calls int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT sum(calls) FROM call_days WHERE workspace_id = $1),
		(SELECT count(*) FROM proposals WHERE workspace_id = $1) + (SELECT count(*) FROM audit_events WHERE workspace_id = $1 AND action = 'proposal.refused')`, w.ws).
		Scan(&folded, &calls); err != nil || folded != calls {
		t.Fatalf("%d calls folded of %d (%v)", folded, calls, err)
	}
}

// A page reads at most TailCap audit rows after the watermark: past it,
// it says it is updating (the roll-up is behind) and counts those it read.
func TestReadDays_SaysUpdatingWhenTheRollUpIsFarBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	w := newCallWorld(t, pool, "far-behind")
	if _, err := pool.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id, data)
		SELECT $1, 'agent', 'proposal.refused', 'tool', 'webhook.post', '{"tool": "webhook.post"}' FROM generate_series(1, $2::int)`, w.ws, TailCap+10); err != nil {
		t.Fatal(err)
	}
	got := readDaysAllowingUpdating(t, ctx, pool, w.ws)
	var calls int64
	for _, c := range got.Counts {
		calls += c.Calls
	}
	if !got.Updating || calls != TailCap {
		t.Fatalf("updating %v with %d calls counted, want true and %d", got.Updating, calls, TailCap)
	}
	catchUp(t, ctx, NewService(pool))
	got = readDaysAllowingUpdating(t, ctx, pool, w.ws)
	calls = 0
	for _, c := range got.Counts {
		calls += c.Calls
	}
	if got.Updating || calls != TailCap+10 {
		t.Fatalf("caught up: updating %v with %d calls, want false and %d", got.Updating, calls, TailCap+10)
	}
}

func readDaysAllowingUpdating(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) Days {
	t.Helper()
	d, err := ReadDays(ctx, db.New(pool), ws, time.Now().AddDate(0, 0, -1), time.Now().AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
