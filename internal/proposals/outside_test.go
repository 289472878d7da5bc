package proposals_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

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
