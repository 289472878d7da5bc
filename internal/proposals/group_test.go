package proposals_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// auto is a call the group takes: no idempotency key, no confirm.
func auto(tool, args string) proposals.Input {
	return proposals.Input{Tool: tool, Arguments: json.RawMessage(args), Rationale: "because the user asked for it"}
}

// groupCalls are the same calls in a fixture's own conversation and
// notebook: writes, reads that see the writes before them, an update.
func groupCalls(t *testing.T, f *fixture) []proposals.Together {
	t.Helper()
	conv := proposals.InConversation(f.conversation(t, "auto"))
	nb := f.notebook(t)
	f.setTrust(t, nb, policy.TrustTrusted)
	book := proposals.InNotebook(nb)
	return []proposals.Together{
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "k1", "value": {"n": 1}}`)},
		{P: f.agent, Scope: conv, In: auto("records.search", `{"query": "k"}`)},
		{P: f.agent, Scope: book, In: auto("records.put", `{"collection": "c", "key": "k2", "value": {"n": 2}}`)},
		{P: f.owner, Scope: conv, In: auto("records.get", `{"collection": "c", "key": "k2"}`)},
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "k1", "value": {"n": 3}}`)},
	}
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}(:\d{2})?)?`)
)

// written is everything the calls wrote (their proposals, transcript
// lines, audit rows and receipts), with ids numbered in order of first
// appearance and times blanked: two databases that recorded the same calls
// the same way give the same text.
func written(t *testing.T, f *fixture) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.id), '[]')::text FROM proposals p`,
		`SELECT coalesce(jsonb_agg(to_jsonb(m) - 'id' ORDER BY m.id), '[]')::text FROM transcript_lines m`,
		`SELECT coalesce(jsonb_agg(to_jsonb(a) - 'id' ORDER BY a.subject_id, a.action), '[]')::text FROM audit_events a WHERE a.subject_type = 'proposal'`,
		`SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY r.proposal_id), '[]')::text FROM receipts r WHERE r.proposal_id IS NOT NULL`,
	} {
		var s string
		if err := f.pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		out += s + "\n"
	}
	ids := map[string]int{}
	out = uuidRE.ReplaceAllStringFunc(out, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = len(ids)
		}
		return fmt.Sprintf("<id %d>", ids[id])
	})
	return timeRE.ReplaceAllString(out, "<time>")
}

// chainVerifies chains the workspace's receipts (the calls' and the
// settings changes') and checks that the chain verifies, every one of
// them in it.
func chainVerifies(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	if _, err := receipts.Sequence(ctx, f.pool, time.Now()); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM receipts WHERE workspace_id = $1", f.agent.WorkspaceID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if res, err := receipts.NewService(f.pool).VerifyWorkspace(ctx, f.agent.WorkspaceID, nil); err != nil || !res.OK || res.Checked != n {
		t.Errorf("chain: %+v %v, want %d receipts verified", res, err, n)
	}
}

// rowCounts are the rows calls wrote: proposals, the tool's records,
// the calls' audit rows, receipts and transcript lines.
type rowCounts struct{ proposals, records, audit, receipts, lines int }

func countRows(t *testing.T, f *fixture) rowCounts {
	t.Helper()
	var c rowCounts
	if err := f.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM proposals), (SELECT count(*) FROM records),
		(SELECT count(*) FROM audit_events WHERE subject_type = 'proposal'), (SELECT count(*) FROM receipts WHERE proposal_id IS NOT NULL),
		(SELECT count(*) FROM transcript_lines WHERE conversation_id IS NOT NULL)`).Scan(&c.proposals, &c.records, &c.audit, &c.receipts, &c.lines); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGroupCommit_RecordsExactlyWhatCallsAloneRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One database where every call has its own transaction...
	alone := newFixture(t)
	alone.props.SetGroupCommit(0)
	for i, c := range groupCalls(t, alone) {
		if _, err := alone.props.Propose(ctx, c.P, c.Scope, c.In); err != nil {
			t.Fatalf("call %d alone: %v", i, err)
		}
	}
	// ...and one where the same calls share one.
	together := newFixture(t)
	outs, errs, left := together.props.ProposeTogether(ctx, groupCalls(t, together))
	for i := range outs {
		if errs[i] != nil || left[i] || outs[i].Status != proposals.StatusApplied {
			t.Fatalf("call %d together: %+v %v (left the group: %v)", i, outs[i], errs[i], left[i])
		}
		if outs[i].CreatedAt != outs[0].CreatedAt || outs[i].EffectDecision == nil || outs[i].EffectDecision.State != policy.StateAllowed {
			t.Errorf("call %d was not recorded in the group's transaction: %+v", i, outs[i])
		}
	}
	// What each call saw: the search and the get ran after the puts before them.
	if !json.Valid(outs[1].Result) || !json.Valid(outs[3].Result) || string(outs[3].Result) == "" {
		t.Fatalf("results: %s, %s", outs[1].Result, outs[3].Result)
	}
	if a, b := written(t, alone), written(t, together); a != b {
		t.Errorf("the group wrote other rows than the calls alone:\nalone:    %s\ntogether: %s", a, b)
	}
	// The group's receipts chain like any others.
	chainVerifies(t, together)
}

func TestGroupCommit_AFailingToolFailsOnlyItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	conv := proposals.InConversation(f.conversation(t, "auto"))
	outs, errs, left := f.props.ProposeTogether(ctx, []proposals.Together{
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "a", "value": {"n": 1}}`)},
		{P: f.agent, Scope: conv, In: auto("records.get", `{"collection": "c", "key": "missing"}`)},
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "b", "value": {"n": 2}}`)},
	})
	for i, want := range []string{proposals.StatusApplied, proposals.StatusFailed, proposals.StatusApplied} {
		if errs[i] != nil || outs[i].Status != want || !left[i] {
			t.Errorf("call %d: %+v %v (left the group: %v), want %s alone", i, outs[i], errs[i], left[i], want)
		}
	}
	// Each call once: the group's work rolled back before they ran alone.
	if got, want := countRows(t, f), (rowCounts{proposals: 3, records: 2, audit: 3, receipts: 3, lines: 3}); got != want {
		t.Errorf("rows %+v, want %+v", got, want)
	}
}

func TestGroupCommit_CallsThatWouldNotRunAtOnceLeaveTheGroupBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	auto1, auto2 := proposals.InConversation(f.conversation(t, "auto")), proposals.InConversation(f.conversation(t, "auto"))
	approve := proposals.InConversation(f.conversation(t, "approve"))
	someoneElses := proposals.InConversation(f.conversation(t, "auto"))
	outs, errs, left := f.props.ProposeTogether(ctx, []proposals.Together{
		{P: f.agent, Scope: auto1, In: auto("records.put", `{"collection": "c", "key": "a", "value": {"n": 1}}`)},
		{P: f.agent, Scope: approve, In: auto("records.put", `{"collection": "c", "key": "b", "value": {"n": 2}}`)},
		{P: f.other, Scope: someoneElses, In: auto("records.put", `{"collection": "c", "key": "c", "value": {"n": 3}}`)},
		{P: f.agent, Scope: auto2, In: auto("records.put", `{"collection": "c", "key": "d", "value": {"n": 4}}`)},
	})
	if errs[0] != nil || errs[3] != nil || left[0] || left[3] || outs[0].Status != proposals.StatusApplied || outs[3].Status != proposals.StatusApplied {
		t.Errorf("the automatic calls: %+v %v, %+v %v", outs[0], errs[0], outs[3], errs[3])
	}
	if outs[0].CreatedAt != outs[3].CreatedAt {
		t.Error("the automatic calls did not share the transaction")
	}
	if errs[1] != nil || !left[1] || outs[1].Status != proposals.StatusPending {
		t.Errorf("the call in approve mode: %+v %v (left: %v), want pending, alone", outs[1], errs[1], left[1])
	}
	if !left[2] || errs[2] == nil {
		t.Errorf("a call in someone else's conversation: %+v %v (left: %v), want not found, alone", outs[2], errs[2], left[2])
	}
}

func TestGroupCommit_ConcurrentCallsThroughProposeAllLandOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.props.SetGroupCommit(1) // one writer: calls queue behind it and share the next transaction
	conv := proposals.InConversation(f.conversation(t, "auto"))
	const n = 48
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			args := fmt.Sprintf(`{"collection": "c", "key": "k%d", "value": {"n": %d}}`, i, i)
			var out proposals.Proposal
			out, errs[i] = f.props.Propose(ctx, f.agent, conv, auto("records.put", args))
			if errs[i] == nil && out.Status != proposals.StatusApplied {
				errs[i] = fmt.Errorf("status %s", out.Status)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if got, want := countRows(t, f), (rowCounts{proposals: n, records: n, audit: n, receipts: n, lines: n}); got != want {
		t.Errorf("rows %+v, want %+v", got, want)
	}
	var transactions int
	f.pool.QueryRow(ctx, `SELECT count(DISTINCT created_at) FROM proposals`).Scan(&transactions)
	if transactions >= n {
		t.Errorf("%d calls in %d transactions: none shared one", n, transactions)
	}
	// Every line points at its own call, and a group's lines are in the
	// order its calls ran (their ids are drawn in that order, one after
	// the other). Across groups and lone calls there is no such order:
	// concurrent calls draw their ids and their lines' in either order.
	var misplaced int
	f.pool.QueryRow(ctx, `SELECT count(*) FROM transcript_lines m JOIN proposals p ON p.id = m.proposal_id
		WHERE m.conversation_id IS DISTINCT FROM p.conversation_id OR m.content <> p.tool`).Scan(&misplaced)
	var disordered bool
	f.pool.QueryRow(ctx, `SELECT coalesce(bool_or(g.lines IS DISTINCT FROM g.ids), false) FROM (
		SELECT array_agg(m.proposal_id ORDER BY m.id) AS lines, array_agg(m.proposal_id ORDER BY p.id) AS ids
		FROM transcript_lines m JOIN proposals p ON p.id = m.proposal_id
		GROUP BY p.created_at) g`).Scan(&disordered)
	if misplaced != 0 || disordered {
		t.Errorf("transcript: %d lines on the wrong call, out of order: %v", misplaced, disordered)
	}
	chainVerifies(t, f)
}

// A caller that goes away while queued gets its context's error and
// nothing is written for it; the others are unaffected.
func TestGroupCommit_ACallerThatWentAwayIsLeftOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	conv := proposals.InConversation(f.conversation(t, "auto"))
	gone, cancel := context.WithCancel(ctx)
	cancel()
	outs, errs, _ := f.props.ProposeTogether(ctx, []proposals.Together{
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "a", "value": {"n": 1}}`)},
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "gone", "value": {"n": 2}}`), Ctx: gone},
		{P: f.agent, Scope: conv, In: auto("records.put", `{"collection": "c", "key": "b", "value": {"n": 3}}`)},
	})
	if !errors.Is(errs[1], context.Canceled) || outs[1].ID != uuid.Nil {
		t.Errorf("the caller that went away: %+v %v", outs[1], errs[1])
	}
	if errs[0] != nil || errs[2] != nil || outs[0].CreatedAt != outs[2].CreatedAt {
		t.Errorf("the others: %+v %v, %+v %v", outs[0], errs[0], outs[2], errs[2])
	}
	var written int
	f.pool.QueryRow(ctx, `SELECT count(*) FROM records WHERE key = 'gone'`).Scan(&written)
	if written != 0 {
		t.Error("the call of a caller that went away ran")
	}
}

// A tool that panics in a group takes only its own call down: the group
// rolls back, every call runs again alone, and each of the others runs
// once.
func TestGroupCommit_APanickingToolTakesOnlyItsOwnCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}}}`)
	contract := tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, Risk: policy.RiskLow, ActionClass: "tool.call.local"}
	registry, err := tools.NewRegistry(policy.DefaultClasses(),
		tools.Tool{Name: "t.put", Effect: policy.EffectMutate, Schema: schema, Contract: contract,
			Execute: func(ctx context.Context, q *db.Queries, ws uuid.UUID, args json.RawMessage) (any, error) {
				var a struct{ Key string }
				json.Unmarshal(args, &a)
				return q.PutRecord(ctx, db.PutRecordParams{WorkspaceID: ws, Collection: "c", Key: a.Key, Value: json.RawMessage(`{}`)})
			}},
		tools.Tool{Name: "t.boom", Effect: policy.EffectMutate, Schema: schema, Contract: contract,
			Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) { panic("boom") }},
	)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, registry)
	conv := proposals.InConversation(f.conversation(t, "auto"))
	outs, errs, left := f.props.ProposeTogether(ctx, []proposals.Together{
		{P: f.agent, Scope: conv, In: auto("t.put", `{"key": "a"}`)},
		{P: f.agent, Scope: conv, In: auto("t.boom", `{"key": "b"}`)},
		{P: f.agent, Scope: conv, In: auto("t.put", `{"key": "c"}`)},
	})
	if errs[0] != nil || errs[2] != nil || outs[0].Status != proposals.StatusApplied || outs[2].Status != proposals.StatusApplied || !left[0] || !left[2] {
		t.Errorf("the others: %+v %v, %+v %v", outs[0], errs[0], outs[2], errs[2])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "boom") || !left[1] {
		t.Errorf("the panicking call: %+v %v (left: %v), want its panic, alone", outs[1], errs[1], left[1])
	}
	var records, applied int
	f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM proposals WHERE status = 'applied')`).Scan(&records, &applied)
	if records != 2 || applied != 2 {
		t.Errorf("records %d, applied calls %d; want 2, 2 (each once)", records, applied)
	}
}
