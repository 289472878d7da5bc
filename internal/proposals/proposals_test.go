package proposals_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type fixture struct {
	pool  *pgxpool.Pool
	convs *conversations.Service
	nbs   *notebooks.Service
	props *proposals.Service
	auth  *auth.Service
	owner auth.Principal // the owner in the browser
	agent auth.Principal // the owner's agent
	other auth.Principal // another member
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, registry)
}

// newFixtureWith is a fixture whose service declares the given tools.
func newFixtureWith(t testing.TB, registry *tools.Registry) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	a := auth.NewService(pool, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	ws, err := a.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"owner@example.com", "other@example.com"} {
		if _, err := a.CreateUser(ctx, ws, email, "a long enough password", auth.RoleMember); err != nil {
			t.Fatal(err)
		}
	}
	principal := func(email string, kind auth.TokenKind) auth.Principal {
		tok, err := a.CreateToken(ctx, email, kind, "t")
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.AuthenticateToken(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return &fixture{
		auth: a,
		pool: pool, convs: conversations.NewService(pool), nbs: notebooks.NewService(pool),
		props: proposals.NewService(pool, registry, slog.New(slog.DiscardHandler)),
		owner: principal("owner@example.com", auth.TokenUser), agent: principal("owner@example.com", auth.TokenAgent),
		other: principal("other@example.com", auth.TokenUser),
	}
}

func (f *fixture) conversation(t *testing.T, mode string) uuid.UUID {
	t.Helper()
	c, err := f.convs.Create(context.Background(), f.owner, "test")
	if err != nil {
		t.Fatal(err)
	}
	if mode != "" {
		f.setMode(t, c.ID, mode)
	}
	return c.ID
}

func (f *fixture) setMode(t *testing.T, id uuid.UUID, mode string) {
	t.Helper()
	if _, err := f.convs.Update(context.Background(), f.owner, id, conversations.Update{PermissionMode: &mode}); err != nil {
		t.Fatal(err)
	}
}

// call is a proposed call with a fresh idempotency key (write-non-idempotent
// and irreversible tools require one).
func call(tool, args string) proposals.Input {
	return proposals.Input{Tool: tool, Arguments: json.RawMessage(args), Rationale: "because the user asked for it",
		IdempotencyKey: "test-" + strings.ReplaceAll(uuid.NewString(), "-", "")}
}

func (f *fixture) auditActions(t *testing.T, subject uuid.UUID) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), "SELECT action || ':' || coalesce(data->>'path', '') FROM audit_events WHERE subject_id = $1 ORDER BY id", subject.String())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		out = append(out, s)
	}
	return out
}

func TestPropose_ModeToggleBetweenProposalsChangesDisposition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "")
	first, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.put", `{"collection":"c","key":"k1","value":{"n":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if first.Disposition != string(policy.Propose) || first.Status != proposals.StatusPending {
		t.Fatalf("in approve mode: %s %s", first.Disposition, first.Status)
	}
	f.setMode(t, conv, "auto")
	second, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.put", `{"collection":"c","key":"k2","value":{"n":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if second.Disposition != string(policy.AutoApply) || second.Status != proposals.StatusApplied || second.ApplyPath != proposals.PathAuto {
		t.Fatalf("in auto mode: %s %s %s", second.Disposition, second.Status, second.ApplyPath)
	}
	var n int
	f.pool.QueryRow(ctx, "SELECT count(*) FROM records WHERE key = 'k2'").Scan(&n)
	if n != 1 {
		t.Fatalf("auto-applied put wrote %d records", n)
	}
	// Destructive calls ask even in auto: the scope gate wants the owner,
	// and records.delete's high risk an approver (ADR-036), the stricter.
	del, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.delete", `{"collection":"c","key":"k2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if del.Disposition != string(policy.Propose) || del.Status != proposals.StatusPendingApproval || del.Decision.Disposition != "defer" || layer(del.Decision, policy.LayerScope).State != policy.StateReviewRequired {
		t.Fatalf("destructive in auto: %s %s %+v", del.Disposition, del.Status, del.Decision)
	}
	// Reads run at once in approve mode too.
	f.setMode(t, conv, "approve")
	read, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.get", `{"collection":"c","key":"k2"}`))
	if err != nil || read.Disposition != string(policy.AutoRun) || read.Status != proposals.StatusApplied {
		t.Fatalf("read: %+v %v", read, err)
	}
}

func TestApply_FiftyConcurrentApprovesExecuteOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "auto")
	if _, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("records.put", `{"collection":"c","key":"k","value":{}}`)); err != nil {
		t.Fatal(err)
	}
	f.setMode(t, conv, "approve")
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), call("notes.append", `{"collection":"c","key":"k","text":"once"}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied, conflicts := 0, 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.props.Apply(ctx, f.owner, p.ID, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				applied++
			case apperr.Code(err) == apperr.ECONFLICT:
				conflicts++
			default:
				t.Errorf("apply: %v", err)
			}
		}()
	}
	wg.Wait()
	if applied != 1 || conflicts != 49 {
		t.Fatalf("applied %d, conflicts %d; want 1 and 49", applied, conflicts)
	}
	var notes int
	f.pool.QueryRow(ctx, "SELECT jsonb_array_length(notes) FROM records WHERE key = 'k'").Scan(&notes)
	if notes != 1 {
		t.Fatalf("the note was appended %d times", notes)
	}
	_, err = f.props.Apply(ctx, f.owner, p.ID, nil)
	if apperr.Code(err) != apperr.ECONFLICT || apperr.Message(err) != "This proposal was applied already." {
		t.Fatalf("a later approve: %v", err)
	}
}

// A call that runs at once writes one audit row, the finished one, that
// says all that the created and finished rows of a call a person applied
// say between them (the same fact is not written twice).
func TestApply_AnAutomaticCallsOneAuditRowSaysWhatTheHumanPathsTwoSay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	auto, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "auto")), call("records.put", `{"collection":"c","key":"a","value":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	human, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "approve")), call("records.put", `{"collection":"c","key":"h","value":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Apply(ctx, f.owner, human.ID, nil); err != nil {
		t.Fatal(err)
	}
	a, h := f.auditActions(t, auto.ID), f.auditActions(t, human.ID)
	if len(a) != 1 || a[0] != "proposal.applied:auto" {
		t.Fatalf("auto path audit = %v", a)
	}
	if len(h) != 2 || h[0] != "proposal.created:" || h[1] != "proposal.applied:human" {
		t.Fatalf("human path audit = %v", h)
	}
	keys := func(subject uuid.UUID) map[string]bool {
		var ks []string
		if err := f.pool.QueryRow(ctx, `SELECT array_agg(DISTINCT k ORDER BY k) FROM audit_events, jsonb_object_keys(data) k WHERE subject_id = $1`,
			subject.String()).Scan(&ks); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, k := range ks {
			m[k] = true
		}
		return m
	}
	autoKeys := keys(auto.ID)
	for k := range keys(human.ID) {
		if !autoKeys[k] {
			t.Errorf("the automatic call's audit row does not say %q, which the human path's rows do: %v", k, autoKeys)
		}
	}
}

func TestApply_AgentsCannotApproveOrReject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "")), call("records.put", `{"collection":"c","key":"k","value":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Apply(ctx, f.agent, p.ID, nil); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("agent apply: %v", err)
	}
	if _, err := f.props.Reject(ctx, f.agent, p.ID, "no"); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("agent reject: %v", err)
	}
	if _, err := f.props.Apply(ctx, f.other, p.ID, nil); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("another member's apply: %v", err)
	}
	if got, _ := f.props.Get(ctx, f.owner, p.ID); got.Status != proposals.StatusPending {
		t.Fatalf("status after refused applies: %s", got.Status)
	}
}

func TestReject_ReasonReachesTheAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// records.delete is high risk: with high risk auto-approved, it waits
	// for the owner's card, which the owner rejects.
	f.setWorkspace(t, "auto_approve_high_risk = true")
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "")), call("records.delete", `{"collection":"c","key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Reject(ctx, f.owner, p.ID, "  "); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("empty reason: %v", err)
	}
	if _, err := f.props.Reject(ctx, f.owner, p.ID, "keep that record"); err != nil {
		t.Fatal(err)
	}
	seen, err := f.props.Get(ctx, f.agent, p.ID)
	if err != nil || seen.Status != proposals.StatusRejected || seen.RejectionReason != "keep that record" {
		t.Fatalf("agent sees %+v, %v", seen, err)
	}
	if _, err := f.props.Apply(ctx, f.owner, p.ID, nil); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("apply after reject: %v", err)
	}
}

func TestApply_EditedArgumentsAreRevalidatedAndAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	p, err := f.props.Propose(ctx, f.agent, proposals.InConversation(f.conversation(t, "")), call("records.put", `{"collection":"c","key":"k","value":{"v":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"collection":"c","key":""}`)); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("invalid edit: %v", err)
	}
	got, err := f.props.Apply(ctx, f.owner, p.ID, json.RawMessage(`{"collection":"c","key":"k","value":{"v":2}}`))
	var applied struct{ Value struct{ V int } }
	json.Unmarshal(got.AppliedArguments, &applied)
	if err != nil || got.Status != proposals.StatusApplied || applied.Value.V != 2 {
		t.Fatalf("edited apply: %+v %v", got, err)
	}
	var v string
	f.pool.QueryRow(ctx, "SELECT value->>'v' FROM records WHERE key = 'k'").Scan(&v)
	if v != "2" {
		t.Fatalf("stored value %q, want the edited 2", v)
	}
	if a := f.auditActions(t, p.ID); len(a) != 3 || a[1] != "proposal.edited:" {
		t.Fatalf("audit = %v", a)
	}
}

func TestPropose_BadInputWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "")
	cases := []struct {
		name  string
		in    proposals.Input
		code  string
		field string
	}{
		{"unknown tool", call("records.nuke", `{}`), apperr.ENOTFOUND, "tool"},
		{"short rationale", proposals.Input{Tool: "records.get", Arguments: json.RawMessage(`{"collection":"c","key":"k"}`), Rationale: "why"}, apperr.EINVALID, "rationale"},
		{"missing field", call("records.put", `{"collection":"c","value":{}}`), apperr.EINVALID, "arguments.key"},
		{"wrong type", call("records.put", `{"collection":"c","key":"k","value":"x"}`), apperr.EINVALID, "arguments.value"},
		{"extra field", call("records.get", `{"collection":"c","key":"k","drop":true}`), apperr.EINVALID, "arguments"},
		{"not json", call("records.get", `{"collection":`), apperr.EINVALID, "arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.props.Propose(ctx, f.agent, proposals.InConversation(conv), c.in)
			var ae *apperr.Error
			ok := false
			if e, is := err.(*apperr.Error); is {
				ae, ok = e, true
			}
			if !ok || ae.Code != c.code || len(ae.Fields) == 0 || ae.Fields[0].Field != c.field {
				t.Fatalf("err = %#v, want %s naming %s", err, c.code, c.field)
			}
		})
	}
	if _, err := f.props.Propose(ctx, f.other, proposals.InConversation(conv), call("records.get", `{"collection":"c","key":"k"}`)); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("another member's conversation: %v", err)
	}
	var n int
	f.pool.QueryRow(ctx, "SELECT count(*) FROM proposals").Scan(&n)
	if n != 0 {
		t.Fatalf("%d proposals written by bad input", n)
	}
}

func TestConversation_AgentCannotChangeModeAndChangesAreAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conv := f.conversation(t, "")
	auto := "auto"
	if _, err := f.convs.Update(ctx, f.agent, conv, conversations.Update{PermissionMode: &auto}); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("agent raising its own trust: %v", err)
	}
	bad := "yolo"
	if _, err := f.convs.Update(ctx, f.owner, conv, conversations.Update{PermissionMode: &bad}); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("bad mode: %v", err)
	}
	if _, err := f.convs.Update(ctx, f.other, conv, conversations.Update{PermissionMode: &auto}); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("another member: %v", err)
	}
	if c, _ := f.convs.Get(ctx, f.owner, conv); c.PermissionMode != policy.ModeApprove {
		t.Fatalf("mode changed by refused updates: %s", c.PermissionMode)
	}
	f.setMode(t, conv, "auto")
	var old, new string
	err := f.pool.QueryRow(ctx, "SELECT data->>'old', data->>'new' FROM audit_events WHERE action = 'conversation.permission_mode_changed' AND subject_id = $1", conv.String()).Scan(&old, &new)
	if err != nil || old != "approve" || new != "auto" {
		t.Fatalf("audit row: %q → %q, %v", old, new, err)
	}
}

// person adds a user with a role and returns their user-token principal.
func (f *fixture) person(t *testing.T, email string, role auth.Role) auth.Principal {
	t.Helper()
	ctx := context.Background()
	ws, err := f.auth.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.auth.CreateUser(ctx, ws, email, "a long enough password", role); err != nil {
		t.Fatal(err)
	}
	tok, err := f.auth.CreateToken(ctx, email, auth.TokenUser, "t")
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.auth.AuthenticateToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
