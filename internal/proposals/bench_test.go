package proposals_test

import (
	"context"
	"testing"

	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// BenchmarkPropose_AutoRunRead is the whole propose → apply path for a
// read in a conversation: validate, decide in layers (scope and workspace
// rows), record the proposal, its transcript line and audit row, claim,
// run and record the result.
func BenchmarkPropose_AutoRunRead(b *testing.B) {
	// Thousands of calls from one token: far above the read class's default
	// limit per agent (120 a minute), raised as an operator's file would.
	registry, err := tools.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	file, err := tools.ParsePolicyFile([]byte("tools:\n  records.search:\n    rate_limits: {per_agent_per_minute: 100000000}\n"),
		registry.Classes(), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	if err := tools.ApplyOverrides(registry, file); err != nil {
		b.Fatal(err)
	}
	f := newFixtureWith(b, registry)
	ctx := context.Background()
	conv, err := f.convs.Create(ctx, f.owner, "bench")
	if err != nil {
		b.Fatal(err)
	}
	in := call("records.search", `{"query": "acme"}`)
	for b.Loop() {
		if _, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv.ID), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaseline_OneAuditInsert is the cheapest durable write the
// service makes (one audit row, one round trip, autocommit), measured in
// the same run so the ratio, not the absolute time, is what to read.
func BenchmarkBaseline_OneAuditInsert(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := f.pool.Exec(ctx, `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id)
			SELECT id, 'system', 'bench.write', 'bench', 'x' FROM workspaces LIMIT 1`); err != nil {
			b.Fatal(err)
		}
	}
}
