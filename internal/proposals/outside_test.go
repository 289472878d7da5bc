package proposals_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// upstream is a Forwarder for one upstream read tool, files.read: it
// answers every call, and accepts the tool's definition while accepted.
type upstream struct{ accepted atomic.Bool }

func (u *upstream) Accepted(string, string, string) bool { return u.accepted.Load() }
func (u *upstream) Forward(context.Context, string, string, string, json.RawMessage, bool) (json.RawMessage, error) {
	return json.RawMessage(`{"content": [{"type": "text", "text": "contents"}]}`), nil
}

// outsideReadFixture is a fixture whose registry has files.read, an
// upstream's read tool, forwarded to up.
func outsideReadFixture(t *testing.T) (*fixture, *upstream) {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	up := &upstream{}
	up.accepted.Store(true)
	yes, no := true, false
	decl, err := tools.DeclareUpstream(tools.UpstreamConfig{Name: "files", URL: "http://127.0.0.1:1/mcp"},
		tools.UpstreamTool{Upstream: "files", Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type": "object"}`),
			Annotations: tools.Annotations{ReadOnly: &yes, Destructive: &no, OpenWorld: &no}}, up)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.ReplaceUpstream("files", []tools.Tool{decl}); err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, registry), up
}

// An upstream's read reads what its decision needs outside any
// transaction (a BEGIN and a COMMIT around one read would be a round trip
// for nothing when the call runs at once), and whatever its call then
// writes is still written in one transaction: run at once, held for a
// review, or refused.
func TestOutsideRead_WhatACallWritesIsOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, up := outsideReadFixture(t)
	conv := proposals.InConversation(f.conversation(t, "approve"))
	call := proposals.Input{Tool: "files.read", Arguments: json.RawMessage(`{"path": "a.txt"}`), Rationale: "the owner asked for the file"}
	// written is how many rows the calls wrote since the last look, and
	// how many transactions wrote them.
	var seen int
	written := func(t *testing.T) (rows, txs int) {
		t.Helper()
		var total int
		if err := f.pool.QueryRow(ctx, `
			WITH x AS (
				SELECT xmin::text AS x FROM proposals
				UNION ALL SELECT xmin::text FROM audit_events WHERE action LIKE 'proposal.%'
				UNION ALL SELECT xmin::text FROM receipts
				UNION ALL SELECT xmin::text FROM approvals)
			SELECT count(*), (SELECT count(DISTINCT x) FROM x) FROM x`).Scan(&total, &txs); err != nil {
			t.Fatal(err)
		}
		rows, seen = total-seen, total
		return rows, txs
	}

	// Run at once (a read, even in approve mode): the proposal, its audit
	// row and its receipt, in one transaction.
	out, err := f.props.Propose(ctx, f.agent, conv, call)
	if err != nil || out.Status != proposals.StatusApplied {
		t.Fatalf("run at once: %+v %v", out, err)
	}
	rows, txs := written(t)
	if rows != 3 || txs != 1 {
		t.Fatalf("the call that ran wrote %d rows in %d transactions, want 3 in 1", rows, txs)
	}

	// Held for a review (an open violation on its class): its proposal
	// and audit row, in one more transaction.
	var violation string
	if err := f.pool.QueryRow(ctx, `INSERT INTO trust_violations (workspace_id, action_class, category, reason)
		VALUES ($1, $2, 'other', 'test') RETURNING id`, f.agent.WorkspaceID, out.ActionClass).Scan(&violation); err != nil {
		t.Fatal(err)
	}
	held, err := f.props.Propose(ctx, f.agent, conv, call)
	if err != nil || held.Status == proposals.StatusApplied {
		t.Fatalf("held for a review: %+v %v", held, err)
	}
	if rows, txs := written(t); rows < 2 || txs != 2 {
		t.Fatalf("the held call wrote %d rows in %d transactions of its own, want its proposal and audit row in 1", rows, txs-1)
	}
	if _, err := f.pool.Exec(ctx, "UPDATE trust_violations SET cleared_at = now() WHERE id = $1", violation); err != nil {
		t.Fatal(err)
	}

	// Refused (its definition is no longer the accepted one): its audit
	// row and its refusal receipt, in one more.
	up.accepted.Store(false)
	if _, err := f.props.Propose(ctx, f.agent, conv, call); err == nil {
		t.Fatal("a held tool's call ran")
	}
	if rows, txs := written(t); rows != 2 || txs != 3 {
		t.Fatalf("the refused call wrote %d rows in %d transactions of its own, want its audit row and receipt in 1", rows, txs-2)
	}
}

// proposeQueued starts calls while the outside records' writer is held,
// waits until their records all wait for it, and returns what the calls
// then answer once it is released, after between (if any) has run.
func proposeQueued(t *testing.T, f *fixture, calls []proposals.Together, between func()) ([]proposals.Proposal, []error) {
	t.Helper()
	release := f.props.HoldOutsideRecords()
	outs, errs := make([]proposals.Proposal, len(calls)), make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { outs[i], errs[i] = f.props.Propose(context.Background(), c.P, c.Scope, c.In) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.props.QueuedOutsideRecords() < len(calls) {
		if time.Now().After(deadline) {
			release()
			t.Fatalf("%d of %d records queued", f.props.QueuedOutsideRecords(), len(calls))
		}
		time.Sleep(time.Millisecond)
	}
	if between != nil {
		between()
	}
	release()
	wg.Wait()
	return outs, errs
}

// Outside reads whose records arrive while another is being written share
// one statement, one commit: each with its proposal, audit row and
// receipt, exactly as alone, and their receipts chain like any others.
func TestOutsideRead_RecordsThatArriveTogetherShareAStatement(t *testing.T) {
	t.Parallel()
	f, _ := outsideReadFixture(t)
	f.props.SetGroupCommit(1)
	conv := proposals.InConversation(f.conversation(t, "auto"))
	var calls []proposals.Together
	for i := range 5 {
		calls = append(calls, proposals.Together{P: f.agent, Scope: conv, In: proposals.Input{Tool: "files.read",
			Arguments: json.RawMessage(fmt.Sprintf(`{"path": "%d.txt"}`, i)), Rationale: "the owner asked for the files"}})
	}
	outs, errs := proposeQueued(t, f, calls, nil)
	for i := range calls {
		if errs[i] != nil || outs[i].Status != proposals.StatusApplied || string(outs[i].Result) == "" {
			t.Fatalf("call %d: %q %v", i, outs[i].Status, errs[i])
		}
	}
	var txs int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(DISTINCT xmin::text) FROM proposals").Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if c := countRows(t, f); c.proposals != 5 || c.audit != 5 || c.receipts != 5 || txs != 1 {
		t.Errorf("5 records together wrote %+v in %d transactions, want 5 proposals, audit rows and receipts in 1", c, txs)
	}
	chainVerifies(t, f)
}

// A record the database refuses (here, its conversation was deleted while
// its read was out) fails only its own call, saying why: the others in
// its statement are written again, each alone.
func TestOutsideRead_ARecordThatFailsFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	f, _ := outsideReadFixture(t)
	f.props.SetGroupCommit(1)
	kept, gone := f.conversation(t, "auto"), f.conversation(t, "auto")
	read := proposals.Input{Tool: "files.read", Arguments: json.RawMessage(`{"path": "a.txt"}`), Rationale: "the owner asked for the file"}
	calls := []proposals.Together{
		{P: f.agent, Scope: proposals.InConversation(kept), In: read},
		{P: f.agent, Scope: proposals.InConversation(gone), In: read},
		{P: f.agent, Scope: proposals.InConversation(kept), In: read},
		{P: f.agent, Scope: proposals.InConversation(kept), In: read},
	}
	outs, errs := proposeQueued(t, f, calls, func() {
		if _, err := f.pool.Exec(context.Background(), "DELETE FROM conversations WHERE id = $1", gone); err != nil {
			t.Error(err)
		}
	})
	for i := range calls {
		if i == 1 {
			// Said as such (404), not as an internal error.
			if apperr.Code(errs[i]) != apperr.ENOTFOUND || !strings.Contains(apperr.Message(errs[i]), "conversation was deleted while this call was at files.read") {
				t.Errorf("the call whose conversation was deleted: %q %v", outs[i].Status, errs[i])
			}
			continue
		}
		if errs[i] != nil || outs[i].Status != proposals.StatusApplied {
			t.Errorf("call %d failed with another's record: %q %v", i, outs[i].Status, errs[i])
		}
	}
	if c := countRows(t, f); c.proposals != 3 || c.audit != 3 || c.receipts != 3 {
		t.Errorf("wrote %+v, want the 3 calls that ran, each whole", c)
	}
}
