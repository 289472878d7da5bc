package proposals_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

func (f *fixture) notebook(t *testing.T) uuid.UUID {
	t.Helper()
	nb, err := f.nbs.Create(context.Background(), f.owner, "bench")
	if err != nil {
		t.Fatal(err)
	}
	if nb.TrustLevel != policy.TrustCautious {
		t.Fatalf("a new notebook is %q, want cautious", nb.TrustLevel)
	}
	return nb.ID
}

func (f *fixture) setTrust(t *testing.T, id uuid.UUID, trust policy.TrustLevel) {
	t.Helper()
	s := string(trust)
	if _, err := f.nbs.Update(context.Background(), f.owner, id, notebooks.Update{TrustLevel: &s}); err != nil {
		t.Fatal(err)
	}
}

// trustChanges lists the notebook's audited trust changes as "old→new".
func (f *fixture) trustChanges(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT data->>'old' || '→' || (data->>'new') FROM audit_events
		WHERE action = 'notebook.trust_level_changed' AND subject_id = $1 ORDER BY id`, id.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestNotebook_RaisingTrustBetweenProposalsChangesTheOutcome(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	nb := proposals.InNotebook(f.notebook(t))
	// The trust matrix alone: records.delete is high risk, which would
	// send it to an approver at every trust level unless auto-approved.
	f.setWorkspace(t, "auto_approve_high_risk = true")

	steps := []struct {
		trust      policy.TrustLevel // set before the call; "" keeps it
		tool, args string
		gate       policy.Gate
		status     string
	}{
		{"", "records.get", `{"collection":"c","key":"none"}`, policy.GateAuto, proposals.StatusFailed}, // a read runs (and finds nothing)
		{"", "records.put", `{"collection":"c","key":"k1","value":{"n":1}}`, policy.GateConfirm, proposals.StatusPending},
		{policy.TrustTrusted, "records.put", `{"collection":"c","key":"k2","value":{"n":2}}`, policy.GateAuto, proposals.StatusApplied},
		{"", "records.delete", `{"collection":"c","key":"k2"}`, policy.GateConfirm, proposals.StatusPending},
		{policy.TrustAutonomous, "records.delete", `{"collection":"c","key":"k2"}`, policy.GateAuto, proposals.StatusApplied},
		{policy.TrustCautious, "notes.append", `{"collection":"c","key":"k1","text":"hi"}`, policy.GateConfirm, proposals.StatusPending},
	}
	for i, st := range steps {
		if st.trust != "" {
			f.setTrust(t, nb.ID, st.trust)
		}
		f.forgetRates(t) // two deletes: more than the irreversible class's one a minute
		got, err := f.props.Propose(ctx, f.agent, nb, call(st.tool, st.args))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got.Disposition != string(st.gate) || got.Status != st.status || got.Scope != nb {
			t.Fatalf("step %d (%s): %s %s in %+v; want %s %s", i, st.tool, got.Disposition, got.Status, got.Scope, st.gate, st.status)
		}
		if got.TrustLevel == "" || got.PermissionMode != "" {
			t.Fatalf("step %d: decided under trust %q, mode %q", i, got.TrustLevel, got.PermissionMode)
		}
	}
	want := []string{"cautious→trusted", "trusted→autonomous", "autonomous→cautious"}
	if got := f.trustChanges(t, nb.ID); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("audited trust changes = %v, want %v", got, want)
	}
	cells, err := f.props.Cells(ctx, f.owner, nb.ID)
	if err != nil || len(cells) != len(steps) {
		t.Fatalf("cells: %d, %v", len(cells), err)
	}
	for i, c := range cells {
		if c.Tool != steps[i].tool {
			t.Errorf("cell %d is %s, want %s (cells keep the order they were added in)", i, c.Tool, steps[i].tool)
		}
	}
}

func TestNotebook_PendingCellRunsOnceWhenTheOwnerRunsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	nb := proposals.InNotebook(f.notebook(t))
	p, err := f.props.Propose(ctx, f.agent, nb, call("records.put", `{"collection":"c","key":"k","value":{"v":1}}`))
	if err != nil || p.Status != proposals.StatusPending {
		t.Fatalf("propose: %+v %v", p, err)
	}
	if _, err := f.props.Apply(ctx, f.agent, p.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("an agent ran its own cell: %v", err)
	}
	if _, err := f.props.Apply(ctx, f.other, p.ID, nil); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("another member ran the cell: %v", err)
	}
	ran, err := f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"collection":"c","key":"k","value":{"v":2}}`))
	if err != nil || ran.Status != proposals.StatusApplied || ran.ApplyPath != proposals.PathHuman {
		t.Fatalf("edit & run: %+v %v", ran, err)
	}
	if _, err := f.props.Apply(ctx, f.owner, p.ID, nil); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("a second run: %v", err)
	}
	got, _ := f.props.Propose(ctx, f.owner, nb, call("records.get", `{"collection":"c","key":"k"}`))
	var rec struct {
		Value struct{ V int } `json:"value"`
	}
	if json.Unmarshal(got.Result, &rec); rec.Value.V != 2 {
		t.Fatalf("the edited arguments did not run: %s", got.Result)
	}
}

func TestNotebook_AgentCannotChangeTrustAndOthersCannotSeeIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.notebook(t)
	level, title := "autonomous", "renamed"
	if _, err := f.nbs.Update(ctx, f.agent, id, notebooks.Update{TrustLevel: &level}); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("agent update: %v", err)
	}
	if _, err := f.nbs.Update(ctx, f.agent, id, notebooks.Update{Title: &title}); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("agent rename: %v", err)
	}
	if _, err := f.nbs.Update(ctx, f.other, id, notebooks.Update{TrustLevel: &level}); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("other member update: %v", err)
	}
	if _, err := f.nbs.Get(ctx, f.other, id); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("other member get: %v", err)
	}
	if _, err := f.props.Propose(ctx, f.other, proposals.InNotebook(id), call("records.get", `{"collection":"c","key":"k"}`)); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("other member proposes into the notebook: %v", err)
	}
	for _, bad := range []string{"", "Autonomous", "auto", "yolo"} {
		if _, err := f.nbs.Update(ctx, f.owner, id, notebooks.Update{TrustLevel: &bad}); apperr.Code(err) != apperr.EINVALID {
			t.Errorf("trust %q: %v", bad, err)
		}
	}
	nb, err := f.nbs.Get(ctx, f.owner, id)
	if err != nil || nb.TrustLevel != policy.TrustCautious || nb.Title != "bench" {
		t.Fatalf("the notebook changed: %+v %v", nb, err)
	}
	if got := f.trustChanges(t, id); len(got) != 0 {
		t.Fatalf("refused changes were audited: %v", got)
	}
}

func TestNotebook_TheDatabaseRefusesAnUnknownTrustLevel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.notebook(t)
	if _, err := f.pool.Exec(context.Background(), "UPDATE notebooks SET trust_level = 'yolo' WHERE id = $1", id); err == nil {
		t.Fatal("the CHECK constraint let an unknown trust level in")
	}
}
