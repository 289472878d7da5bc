package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/internal/replay/replaytest"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type fixture struct {
	pool     *pgxpool.Pool
	svc      *replay.Service
	ws       uuid.UUID
	recorded replaytest.Recorded
}

// newFixture records the fixture's ten calls in a database of its own.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.MustPool(t)
	registry := replaytest.MustRegistry(t)
	replaytest.MustPin(t, pool)
	ws := replaytest.MustMember(t, pool, "owner@example.com")
	rec := replaytest.MustRecord(t, pool, registry, "owner@example.com")
	return &fixture{pool: pool, svc: replay.NewService(pool, registry), ws: ws, recorded: rec}
}

func (f *fixture) file(t *testing.T, text string) *tools.PolicyFile {
	t.Helper()
	file, err := f.svc.ParseFile([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// lastHour is a period that holds every call the fixture recorded.
func lastHour() replay.Options {
	now := time.Now()
	return replay.Options{Since: now.Add(-time.Hour), Until: now.Add(time.Minute), Examples: 3}
}

func (f *fixture) replay(t *testing.T, text string, o replay.Options) replay.Report {
	t.Helper()
	r, err := f.svc.Replay(context.Background(), f.file(t, text), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rows counts every table a replay could write to, if it wrote.
func rows(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out []string
	for _, table := range []string{"proposals", "approvals", "audit_events", "receipts", "evidence", "upstream_tools", "idempotency_keys"} {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%d", table, n))
	}
	var changed string
	pool.QueryRow(context.Background(), "SELECT coalesce(max(xmin::text::bigint), 0)::text FROM proposals").Scan(&changed)
	return strings.Join(out, " ") + " xmin=" + changed
}

func group(t *testing.T, r replay.Report, tool string) replay.Group {
	t.Helper()
	for _, g := range r.Groups {
		if g.Tool == tool {
			return g
		}
	}
	t.Fatalf("no group for %s in %+v", tool, r.Groups)
	return replay.Group{}
}

func exampleIDs(exs []replay.Example) []uuid.UUID {
	out := make([]uuid.UUID, len(exs))
	for i, e := range exs {
		out[i] = e.ID
	}
	return out
}

func TestReplay_TighteningAReadMakesItAskAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := rows(t, f.pool)
	r := f.replay(t, replaytest.TightenFile, lastHour())
	if after := rows(t, f.pool); after != before {
		t.Fatalf("the replay wrote: %s, then %s", before, after)
	}
	tot := r.Totals
	if tot.Calls != 10 || tot.Unchanged != 6 || tot.NewlyAsks != 4 || tot.NewlyAllowed != 0 || tot.NewlyBlocked != 0 || tot.Restated != 0 ||
		tot.ApprovalsCost != 4 || tot.ApprovalsSaved != 0 {
		t.Fatalf("totals %+v", tot)
	}
	if r.Covered != 7 || r.NotCovered != 3 || r.Unreadable != 0 || len(r.NoAnnotations) != 0 || r.StoppedEarly {
		t.Fatalf("report %+v", r)
	}
	fetch := group(t, r, "up.fetch")
	if !fetch.Covered || fetch.ActionClass != "read.context" || fetch.Calls != 4 || fetch.NewlyAsks != 4 {
		t.Fatalf("up.fetch %+v", fetch)
	}
	// The first three, in the order they were made.
	if got := exampleIDs(fetch.Examples[replay.NewlyAsks]); !slices.Equal(got, f.recorded.Fetch[:3]) {
		t.Fatalf("examples %v, want %v", got, f.recorded.Fetch[:3])
	}
	if ex := fetch.Examples[replay.NewlyAsks][0]; ex.Before != "allowed" || ex.After != "review_required" || ex.Status != "applied" || ex.WorkspaceID != f.ws {
		t.Fatalf("example %+v", ex)
	}
	if w := group(t, r, "up.write"); w.Unchanged != 3 {
		t.Fatalf("up.write, which the file leaves as it was: %+v", w)
	}
	if s := group(t, r, "records.search"); s.Covered || s.Unchanged != 3 {
		t.Fatalf("records.search, a built-in tool: %+v", s)
	}
	if got := r.Occurred([]replay.Kind{replay.NewlyAllowed, replay.NewlyAsks, replay.Changed}); !slices.Equal(got, []replay.Kind{replay.NewlyAsks, replay.Changed}) {
		t.Fatalf("occurred %v", got)
	}
}

func TestReplay_LooseningAChangeLetsItRunAndNamesWhatPeopleRejected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.replay(t, replaytest.LoosenFile, lastHour())
	tot := r.Totals
	if tot.NewlyAllowed != 3 || tot.NewlyAllowedDestructive != 0 || tot.Overruled != 1 || tot.ApprovalsSaved != 3 || tot.ApprovalsCost != 0 || tot.Unchanged != 7 {
		t.Fatalf("totals %+v", tot)
	}
	w := group(t, r, "up.write")
	if w.ActionClass != "tool.call.local" || w.NewlyAllowed != 3 {
		t.Fatalf("up.write %+v", w)
	}
	exs := w.Examples[replay.NewlyAllowed]
	if !slices.Equal(exampleIDs(exs), f.recorded.Write) || exs[0].Status != "rejected" || exs[0].Before != "review_required" || exs[0].After != "allowed" {
		t.Fatalf("examples %+v", exs)
	}
	if got := r.Occurred([]replay.Kind{replay.NewlyAllowedDestructive, replay.NewlyBlocked}); len(got) != 0 {
		t.Fatalf("occurred %v", got)
	}
}

func TestReplay_TheFileTheCallsWereDecidedUnderChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.replay(t, replaytest.LiveFile, lastHour())
	if r.Totals.Calls != 10 || r.Totals.Unchanged != 10 || r.Covered != 7 {
		t.Fatalf("replaying the live file: %+v", r)
	}
}

func TestReplay_APageAtATimeGivesTheSameReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := lastHour()
	o.Since = time.Now().Add(-49 * time.Hour) // windows of ids without calls first
	for _, file := range []string{replaytest.TightenFile, replaytest.LoosenFile} {
		o.PageSize = 1000
		whole := f.replay(t, file, o)
		for _, size := range []int{3, 5, 10} { // 5 and 10: a full page ends the calls
			o.PageSize = size
			paged := f.replay(t, file, o)
			if !reflect.DeepEqual(whole, paged) {
				a, _ := json.Marshal(whole)
				b, _ := json.Marshal(paged)
				t.Fatalf("one page:\n%s\npages of %d:\n%s", a, size, b)
			}
		}
		if whole.Totals.Calls != 10 {
			t.Fatalf("%d calls", whole.Totals.Calls)
		}
	}
}

func TestReplay_UnreadableInputsAreCountedNotFatal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.pool.Exec(context.Background(), "UPDATE proposals SET decision_input = NULL WHERE id = $1", f.recorded.Fetch[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(context.Background(), `UPDATE proposals SET decision_input = '"not a call"' WHERE id = $1`, f.recorded.Fetch[1]); err != nil {
		t.Fatal(err)
	}
	r := f.replay(t, replaytest.TightenFile, lastHour())
	if r.Unreadable != 2 || !slices.Equal(r.UnreadableExamples, f.recorded.Fetch[:2]) || r.Totals.Calls != 8 || r.Totals.NewlyAsks != 2 {
		t.Fatalf("report %+v", r)
	}
}

func TestReplay_OnlyTheWorkspaceAndPeriodAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other, err := db.New(f.pool).EnsureWorkspace(context.Background(), db.EnsureWorkspaceParams{Slug: "other", Name: "Another team"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uuid.UUID{"other": other.ID, "Another team": other.ID, other.ID.String(): other.ID, auth.DefaultWorkspaceSlug: f.ws} {
		if got, err := f.svc.FindWorkspace(context.Background(), name); err != nil || got != want {
			t.Fatalf("find %q: %v %v", name, got, err)
		}
	}
	if _, err := f.svc.FindWorkspace(context.Background(), "nobody"); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("an unknown workspace: %v", err)
	}
	o := lastHour()
	o.WorkspaceID = other.ID
	if r := f.replay(t, replaytest.TightenFile, o); r.Totals.Calls != 0 || r.WorkspaceID == nil || *r.WorkspaceID != other.ID {
		t.Fatalf("another workspace: %+v", r)
	}
	o.WorkspaceID = f.ws
	if r := f.replay(t, replaytest.TightenFile, o); r.Totals.Calls != 10 {
		t.Fatalf("the workspace: %+v", r.Totals)
	}
	o = lastHour()
	o.Since, o.Until = time.Now().Add(time.Minute), time.Now().Add(time.Hour)
	if r := f.replay(t, replaytest.TightenFile, o); r.Totals.Calls != 0 {
		t.Fatalf("a period after the calls: %+v", r.Totals)
	}
}

func TestReplay_StopsAtItsTimeWithWhatItRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := lastHour()
	o.PageSize, o.StopAt = 3, time.Now()
	r := f.replay(t, replaytest.TightenFile, o)
	if !r.StoppedEarly || r.Totals.Calls != 3 || r.ReadUntil == nil {
		t.Fatalf("stopped: %+v", r)
	}
}

func TestReplayWorkspace_AdminsOnlyAndABadFileNamesItsLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := auth.Principal{UserID: uuid.New(), WorkspaceID: f.ws, Role: auth.RoleAdmin}
	for _, p := range []auth.Principal{
		{UserID: uuid.New(), WorkspaceID: f.ws, Role: auth.RoleMember},
		{UserID: uuid.New(), WorkspaceID: f.ws, Role: auth.RoleApprover},
		{UserID: admin.UserID, WorkspaceID: f.ws, Role: auth.RoleAdmin, TokenKind: auth.TokenAgent},
	} {
		if _, err := f.svc.ReplayWorkspace(context.Background(), p, replaytest.TightenFile, "7d", time.Now()); apperr.Code(err) != apperr.EFORBIDDEN {
			t.Fatalf("%s (%s): %v", p.Role, p.TokenKind, err)
		}
	}
	_, err := f.svc.ReplayWorkspace(context.Background(), admin, "upstreams:\n  - name: up\n    url: http://127.0.0.1:9/mcp\n    colour: red\n", "7d", time.Now())
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.EINVALID || len(ae.Fields) != 1 || ae.Fields[0].Field != "policy" || !strings.Contains(ae.Fields[0].Message, "line 4") {
		t.Fatalf("a bad file: %v", err)
	}
	if _, err := f.svc.ReplayWorkspace(context.Background(), admin, replaytest.TightenFile, "1y", time.Now()); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("a period the page does not offer: %v", err)
	}
	r, err := f.svc.ReplayWorkspace(context.Background(), admin, replaytest.TightenFile, "1d", time.Now())
	if err != nil || r.Totals.NewlyAsks != 4 || r.WorkspaceID == nil || *r.WorkspaceID != f.ws {
		t.Fatalf("the admin's replay: %+v %v", r, err)
	}
}

// The replay predicts what enforcing the file does: the same calls,
// proposed again under a registry declared from the candidate file, are
// decided as the replay said, call by call.
func TestReplay_PredictsWhatEnforcingTheFileDoes(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{"tighten": replaytest.TightenFile, "loosen": replaytest.LoosenFile, "live": replaytest.LiveFile} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			o := lastHour()
			o.Examples = replay.MaxExamples // every changed call is an example
			r := f.replay(t, text, o)
			predicted := map[uuid.UUID]string{}
			for _, g := range r.Groups {
				for _, k := range []replay.Kind{replay.NewlyAsks, replay.NewlyAllowed, replay.NewlyBlocked, replay.Restated} {
					for _, ex := range g.Examples[k] {
						predicted[ex.ID] = string(ex.After)
					}
				}
			}
			enforced := replaytest.MustEnforce(t, f.pool, replaytest.MustRegistryFor(t, text), "owner@example.com")
			recorded, again := f.recorded.All(), enforced.All()
			for i, id := range recorded {
				var was, now string
				if err := f.pool.QueryRow(context.Background(), "SELECT state FROM proposals WHERE id = $1", id).Scan(&was); err != nil {
					t.Fatal(err)
				}
				if err := f.pool.QueryRow(context.Background(), "SELECT state FROM proposals WHERE id = $1", again[i]).Scan(&now); err != nil {
					t.Fatal(err)
				}
				want, changed := predicted[id]
				if !changed {
					want = was
				}
				if now != want {
					t.Errorf("call %d: recorded %s, replay predicted %s, enforced %s", i, was, want, now)
				}
			}
		})
	}
}

// A file's override of a built-in tool is replayed too: records.search,
// gated by the file, would have asked an approver every time.
func TestReplay_ABuiltinToolsOverrideIsReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.replay(t, "tools:\n  records.search:\n    human_gated: true\n", lastHour())
	s := group(t, r, "records.search")
	if !s.Covered || s.Calls != 3 || s.NewlyAsks != 3 || s.ApprovalsCost != 3 {
		t.Fatalf("records.search under the file: %+v", s)
	}
	if w := group(t, r, "up.write"); w.Covered || w.Unchanged != 3 {
		t.Fatalf("an upstream tool the file does not declare: %+v", w)
	}
}
