package proposals_test

import (
	"context"
	"testing"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// The effective policy's version is audited and receipted once per
// change: again at the same hash records nothing; an override of a
// built-in tool is a new version naming the previous one.
func TestRecordPolicyVersion_OncePerChange(t *testing.T) {
	t.Parallel()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, registry)
	ctx := context.Background()
	ws := f.owner.WorkspaceID
	for i, want := range []bool{true, false} {
		got, err := f.props.RecordPolicyVersion(ctx, ws)
		if err != nil || got != want {
			t.Fatalf("record %d: %v %v, want %v", i, got, err, want)
		}
	}
	first := registry.Hash()
	file, err := tools.ParsePolicyFile([]byte("tools:\n  records.get:\n    rate_limits: {per_agent_per_minute: 30}\n"), registry.Classes(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.ApplyOverrides(registry, file); err != nil {
		t.Fatal(err)
	}
	if got, err := f.props.RecordPolicyVersion(ctx, ws); err != nil || !got {
		t.Fatalf("after an override: %v %v", got, err)
	}
	var n, receipts int
	var prev, hash string
	f.pool.QueryRow(ctx, `SELECT count(*), max(data->>'previous') FILTER (WHERE data->>'previous' <> ''), max(data->>'hash') FILTER (WHERE data->>'previous' <> '')
		FROM audit_events WHERE action = 'policy.changed'`).Scan(&n, &prev, &hash)
	f.pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE kind = 'setting_change'`).Scan(&receipts)
	if n != 2 || receipts != 2 || prev != first || hash != registry.Hash() || hash == first {
		t.Fatalf("%d audit rows, %d receipts; previous %s (want %s), hash %s", n, receipts, prev, first, hash)
	}
}
