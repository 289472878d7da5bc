package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The issue's million, and CI's twenty thousand, in the same proportions.
func TestPlanVolume_ScalesTheIssuesMillion(t *testing.T) {
	t.Parallel()
	for calls, want := range map[int]volumePlan{
		1_000_000: {Calls: 1_000_000, Conversations: 1000, HotCalls: 200_000, PendingPackets: 10_000, Evidence: 50_000, Feedback: 5000, Notebooks: 100},
		20_000:    {Calls: 20_000, Conversations: 20, HotCalls: 4000, PendingPackets: 200, Evidence: 1000, Feedback: 100, Notebooks: 2},
		1000:      {Calls: 1000, Conversations: 2, HotCalls: 200, PendingPackets: 10, Evidence: 50, Feedback: 5, Notebooks: 1},
	} {
		if got := planVolume(calls); got != want {
			t.Errorf("planVolume(%d) = %+v\nwant %+v", calls, got, want)
		}
	}
}

// The timeline holds exactly the plan: the hot conversation's share, the
// pending packets within the approval window, in time order, and the same
// every time.
func TestTimeline_HoldsThePlanInTimeOrder(t *testing.T) {
	t.Parallel()
	plan := planVolume(20_000)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	events := plan.timeline(now, rand.New(rand.NewPCG(fillRandomState, 0)))
	if want := plan.Calls + plan.Conversations - 2 + plan.Notebooks + plan.Feedback; len(events) != want {
		t.Fatalf("%d events, want %d", len(events), want)
	}
	count := map[fillKind]int{}
	hot := 0
	for i, e := range events {
		count[e.kind]++
		at := time.Unix(0, e.at)
		if i > 0 && e.at < events[i-1].at {
			t.Fatalf("event %d is older than the one before it", i)
		}
		if e.kind.isCall() && e.conv == 0 {
			hot++
		}
		switch {
		case e.kind == kindPacketPending && (at.Before(now.Add(-packetSpan)) || at.After(now.Add(-packetSpanEnd))):
			t.Errorf("a pending packet at %s: outside the approval window", at)
		case (e.kind == kindConversation || e.kind == kindNotebook) && at.After(now.Add(-callSpan)):
			t.Errorf("a %s created at %s, after calls began", e.kind, at)
		case e.kind.isCall() && (at.After(now) || at.Before(now.Add(-callSpan))):
			t.Errorf("a call at %s: outside the half year", at)
		case e.kind == kindCard && !approveMode(int(e.conv)), e.kind == kindRefused && approveMode(int(e.conv)):
			t.Errorf("a %s call in conversation %d", e.kind, e.conv)
		}
	}
	calls := 0
	for k, n := range count {
		if k.isCall() {
			calls += n
		}
	}
	if calls != plan.Calls || hot != plan.HotCalls || count[kindPacketPending] != plan.PendingPackets ||
		count[kindFeedback] != plan.Feedback || count[kindNotebook] != plan.Notebooks {
		t.Errorf("calls %d (hot %d), pending packets %d, feedback %d, notebooks %d; plan %+v",
			calls, hot, count[kindPacketPending], count[kindFeedback], count[kindNotebook], plan)
	}
	if count[kindRead] < plan.Calls*4/10 || count[kindWrite] < plan.Calls*3/10 || count[kindRefused] == 0 || count[kindCard] == 0 || count[kindPacketApproved] == 0 {
		t.Errorf("mix: %v", count)
	}
	again := plan.timeline(now, rand.New(rand.NewPCG(fillRandomState, 0)))
	if !slices.Equal(events, again) {
		t.Error("the same plan and seed gave another timeline")
	}
}

// Judgments are added at random among the changes and approved packets
// until the evidence rows come to the plan's, counting the rows the
// server writes by itself; never more judgments than there are calls to
// judge.
func TestMarkEvidence_TopsUpToThePlan(t *testing.T) {
	t.Parallel()
	events := planVolume(20_000).timeline(time.Now(), rand.New(rand.NewPCG(1, 2)))
	auto := func(e fillEvent) int { // say the owner's confirms record one
		if e.kind == kindWrite && approveMode(int(e.conv)) {
			return 1
		}
		return 0
	}
	judged := func(fillEvent) int { return 1 }
	base := 0
	for _, e := range events {
		base += auto(e)
	}
	for _, want := range []int{0, base, base + 1000} {
		marked := slices.Clone(events)
		if got := markEvidence(marked, want, auto, judged, rand.New(rand.NewPCG(3, 4))); got != max(want, base) {
			t.Errorf("want %d (the server's own %d): %d rows", want, base, got)
		}
		n := 0
		for _, e := range marked {
			if e.evidence {
				n++
				if e.kind != kindWrite && e.kind != kindPacketApproved {
					t.Errorf("a judgment of a %s call", e.kind)
				}
			}
		}
		if n != max(0, want-base) {
			t.Errorf("want %d: %d judgments, want %d", want, n, max(0, want-base))
		}
	}
	few := []fillEvent{{kind: kindWrite}, {kind: kindRead}}
	if got := markEvidence(few, 10, func(fillEvent) int { return 0 }, judged, rand.New(rand.NewPCG(5, 6))); got != 1 || !few[0].evidence || few[1].evidence {
		t.Errorf("one call to judge, ten wanted: %d rows, %+v", got, few)
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{ms(7), 7 * time.Millisecond},
		{ms(9, 1, 5), 5 * time.Millisecond},
		{ms(4, 1, 3, 2), 2500 * time.Microsecond},
		{ms(100, 1, 1, 1, 1), time.Millisecond},
	} {
		in := slices.Clone(c.in)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %s, want %s", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("median reordered its input: %v", c.in)
		}
	}
}

// A page passes when, at volume, its median is at most three times the
// empty database's and under 50 ms; anything that was not a 200 in time
// misses.
func TestPageVerdict(t *testing.T) {
	t.Parallel()
	timed := func(median time.Duration) pageTiming {
		return pageTiming{Samples: []time.Duration{median}, Median: median}
	}
	for _, c := range []struct {
		name          string
		empty, volume pageTiming
		want          string
	}{
		{"fast and flat", timed(4 * time.Millisecond), timed(9 * time.Millisecond), "pass"},
		{"exactly three times", timed(10 * time.Millisecond), timed(30 * time.Millisecond), "pass"},
		{"grows", timed(4 * time.Millisecond), timed(20 * time.Millisecond), "miss: 5.0× > 3×"},
		{"slow but flat", timed(60 * time.Millisecond), timed(70 * time.Millisecond), "miss: 70.00 ms ≥ 50.00 ms"},
		{"both", timed(10 * time.Millisecond), timed(2 * time.Second), "miss: 200.0× > 3×, 2000.00 ms ≥ 50.00 ms"},
		{"timed out", timed(10 * time.Millisecond), pageTiming{TimedOut: true}, "miss: timed out (1m0s)"},
		{"an error page", timed(10 * time.Millisecond), pageTiming{Samples: []time.Duration{time.Millisecond}, Status: 500}, "miss: status 500"},
		{"broken when empty", pageTiming{Status: 404, Samples: []time.Duration{time.Millisecond}}, timed(time.Millisecond), "miss: empty database: status 404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := (pageResult{Empty: c.empty, Volume: c.volume}).verdict(); got != c.want {
				t.Errorf("verdict = %q, want %q", got, c.want)
			}
		})
	}
}

// The report's table and its summary, in the text output and in
// docs/performance.md.
func TestVolumeReport_Renders(t *testing.T) {
	t.Parallel()
	ms := func(n int) pageTiming {
		d := time.Duration(n) * time.Millisecond
		return pageTiming{Samples: slices.Repeat([]time.Duration{d}, pageSamples), Median: d, Bytes: 1234}
	}
	big := ms(900)
	big.Bytes, big.Samples = 5_400_000, big.Samples[:4]
	v := &volumeResult{Plan: planVolume(20_000), Seeded: 15, PeakRSSSignedIn: 50 * 1024, PeakRSSEmpty: 60 * 1024, PeakRSS: 350 * 1024,
		Fill: fillResult{Calls: 20_000, Rows: map[string]int64{"proposals": 19_700, "receipts": 20_010}, Took: 10 * time.Second, Vacuum: 2 * time.Second},
		Pages: []pageResult{
			{Name: "home (header counts, what needs me)", Route: "GET /", Empty: ms(3), Volume: ms(4)},
			{Name: hotPage, Route: "GET /conversations/:id", Empty: ms(8), Volume: big},
		}}
	var md bytes.Buffer
	v.markdown(&md)
	for _, want := range []string{
		"### Pages at volume (`BENCH_VOLUME=20000`)",
		"| page | route | empty p50 | volume p50 | ratio | bytes at volume | target: ≤ 3× and < 50 ms |\n|---|---|---:|---:|---:|---:|---|\n",
		"| home (header counts, what needs me) | `GET /` | 3.00 ms | 4.00 ms | 1.3× | 1.2 KB | pass |\n",
		"| hot conversation | `GET /conversations/:id` | 8.00 ms | 900.00 ms | 112.5× | 5.4 MB | miss: 112.5× > 3×, 900.00 ms ≥ 50.00 ms |\n",
		"- Fill: 20000 calls in 20 conversations (4000 in the hot one), 200 pending approval packets, 1000 evidence rows, 100 feedback items, 2 notebooks; copies of 15 actions seeded through the API; 10s writing (2000 calls/s), 2s VACUUM (ANALYZE).\n",
		"- Rows written: proposals 19700, receipts 20010.\n",
		"- Hot conversation's page at volume: 5.4 MB (target under 200.0 KB): miss.\n",
		"- Server's peak RSS through the phase: 367.0 MB (52.4 MB once signed in, 62.9 MB before the fill; target under 300.0 MB): miss.\n",
		"- Pages within the targets: 1 of 2.\n",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var text bytes.Buffer
	v.printText(&text)
	if !strings.Contains(text.String(), "hot conversation") || !strings.Contains(text.String(), "GET /conversations/:id ") ||
		!strings.Contains(text.String(), "Pages within the targets: 1 of 2.") {
		t.Errorf("text output:\n%s", text.String())
	}
	for kib, want := range map[int64]string{292_968: "pass", 292_969: "miss"} { // 300 MB is 292,968.75 KiB
		v.PeakRSS = kib
		if got := v.summary()[3]; !strings.HasSuffix(got, ": "+want) {
			t.Errorf("peak %d KiB: %q, want %s", kib, got, want)
		}
	}
	rep := &report{opts: options{command: "make bench"}, volume: v}
	if !strings.Contains(string(rep.markdown()), "### Pages at volume") {
		t.Error("docs/performance.md has no volume section")
	}
}

func TestCut_AtEveryToken(t *testing.T) {
	t.Parallel()
	tokens := []token{{text: "ab"}, {text: "abc"}, {text: "x"}}
	parts, slots := cut("1abc2ab3x4xabx", tokens)
	if want := []string{"1", "2", "3", "4", "", "", ""}; !slices.Equal(parts, want) {
		t.Errorf("parts = %q, want %q", parts, want)
	}
	if want := []int{1, 0, 2, 2, 0, 2}; !slices.Equal(slots, want) {
		t.Errorf("slots = %v, want %v", slots, want)
	}
	parts, slots = cut("none here", tokens)
	if !slices.Equal(parts, []string{"none here"}) || len(slots) != 0 {
		t.Errorf("no tokens: %q %v", parts, slots)
	}
}

// A real server on its own database: the seeded calls, a fill of 2,000
// calls through the real schema, and the server's own queries reading it:
// the chain verifies, the pending packets and cards are counted as the
// header and the queue count them, and every page answers 200 before and
// after.
func TestFill_TheServerReadsWhatItWrote(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server and database")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	// The phases call from one token far above the classes' default limits
	// per agent: raised as the harness's policy file raises them (.ci/bench).
	lift := "    rate_limits: {per_agent_per_minute: 100000000}\n"
	file, err := tools.ParsePolicyFile([]byte("tools:\n  records.put:\n"+lift+"  records.get:\n"+lift+"  records.search:\n"+lift),
		registry.Classes(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.ApplyOverrides(registry, file); err != nil {
		t.Fatal(err)
	}
	svc := web.NewServices(pool, slog.New(slog.DiscardHandler), auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry)
	ws, err := svc.Auth.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{ReceiptKey: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))}, slog.New(slog.DiscardHandler), pool, svc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })

	acct := volumeAccount{ownerEmail: "owner@example.com", ownerPassword: "a long enough password", adminEmail: "admin@example.com", adminPassword: "another long password"}
	for _, u := range []struct {
		email, password string
		role            auth.Role
	}{{acct.ownerEmail, acct.ownerPassword, auth.RoleMember}, {acct.adminEmail, acct.adminPassword, auth.RoleAdmin}} {
		if _, err := svc.Auth.CreateUser(ctx, ws, u.email, u.password, u.role); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range []struct {
		into  *string
		email string
		kind  auth.TokenKind
	}{{&acct.agent, acct.ownerEmail, auth.TokenAgent}, {&acct.ownerToken, acct.ownerEmail, auth.TokenUser}, {&acct.adminToken, acct.adminEmail, auth.TokenUser}} {
		if *tk.into, err = svc.Auth.CreateToken(ctx, tk.email, tk.kind, "volume test"); err != nil {
			t.Fatal(err)
		}
	}

	const calls = 2000
	tgt := volumeTarget{base: hs.URL, pool: pool, acct: acct}
	res, err := measureVolume(ctx, tgt, calls, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	plan := res.Plan
	var report bytes.Buffer
	res.printText(&report)
	t.Log(report.String())
	for _, p := range res.Pages {
		if !p.Empty.ok() || !p.Volume.ok() {
			t.Errorf("%s: empty %s, at volume %s", p.Name, timingNote(p.Empty), timingNote(p.Volume))
		}
	}

	q := db.New(pool)
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	if res.Fill.Calls != calls {
		t.Errorf("filled %d calls, want %d", res.Fill.Calls, calls)
	}
	// Seeded: 5 calls in each mode (9 proposals and a refusal), 2
	// conversations, a notebook, a feedback item, 4 judgments.
	refusals := count("SELECT count(*) FROM audit_events WHERE action = 'proposal.refused'")
	if got := count("SELECT count(*) FROM proposals"); got+refusals != calls+10 {
		t.Errorf("%d proposals and %d refusals, want %d calls in all", got, refusals, calls+10)
	}
	if got := count("SELECT count(*) FROM conversations"); got != plan.Conversations {
		t.Errorf("%d conversations, want %d", got, plan.Conversations)
	}
	if got := count("SELECT count(*) FROM proposals WHERE conversation_id IS NOT NULL GROUP BY conversation_id ORDER BY count(*) DESC LIMIT 1"); got < plan.HotCalls {
		t.Errorf("the hot conversation has %d calls, want %d or more", got, plan.HotCalls)
	}
	if got, seeded := count("SELECT count(*) FROM evidence"), count("SELECT count(*) FROM evidence WHERE created_at > now() - interval '1 hour'"); got-seeded != int(res.Fill.Rows["evidence"]) || got-seeded < plan.Evidence {
		t.Errorf("%d evidence rows filled (%d written), want %d or more", got-seeded, res.Fill.Rows["evidence"], plan.Evidence)
	}
	if got := count("SELECT count(*) FROM feedback"); got != plan.Feedback+1 {
		t.Errorf("%d feedback items, want %d and the seeded one", got, plan.Feedback)
	}
	var admin uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT id FROM users WHERE email = $1", acct.adminEmail).Scan(&admin); err != nil {
		t.Fatal(err)
	}
	packets, err := q.CountResolvablePackets(ctx, db.CountResolvablePacketsParams{WorkspaceID: ws, Roles: []string{"approver", "admin"}, UserID: admin})
	if err != nil || packets != int64(plan.PendingPackets+2) {
		t.Errorf("pending packets in the header's count: %d (%v), want %d and the 2 seeded", packets, err, plan.PendingPackets)
	}
	if got := count("SELECT count(*) FROM approvals a JOIN proposals p ON p.id = a.proposal_id WHERE a.status <> 'pending' OR p.status <> 'pending_approval'"); got != count("SELECT count(*) FROM approvals WHERE status = 'approved'") {
		t.Errorf("%d packets disagree with their proposals", got)
	}
	var owner uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT id FROM users WHERE email = $1", acct.ownerEmail).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if cards, err := q.CountWaitingCards(ctx, db.CountWaitingCardsParams{WorkspaceID: ws, OwnerID: owner}); err != nil || cards < 2 {
		t.Errorf("waiting cards: %d (%v), want the seeded one and some filled", cards, err)
	}
	receiptRows := count("SELECT count(*) FROM receipts")
	if got := int(res.Fill.Rows["receipts"]); got < calls*9/10 {
		t.Errorf("%d receipts filled for %d calls", got, calls) // every call but the pending ones has one
	}
	v, err := receipts.NewService(pool).VerifyWorkspace(ctx, ws, nil)
	if err != nil || !v.OK || v.Checked != int64(receiptRows) || v.Pending != 0 {
		t.Errorf("the chain: %+v (%v), want every one of %d receipts verified", v, err, receiptRows)
	}
	// The server's reconciler finds nothing to fix.
	if n, err := svc.Proposals.Reconcile(ctx); err != nil || n != 0 {
		t.Errorf("reconcile: %d (%v), want nothing to fix", n, err)
	}

	// The phase's last step: the server's background verification of
	// the whole filled chain ran to its end, and calls went on meanwhile.
	vr := measureVerify(ctx, tgt, verifyLoad{clients: 2, d: time.Second, limit: time.Minute}, io.Discard)
	if vr.Err != "" || !vr.OK || vr.Receipts < int64(receiptRows) || vr.Took <= 0 || vr.Alone.OK == 0 || vr.Meanwhile.OK == 0 ||
		vr.Meanwhile.OK != vr.Meanwhile.Calls {
		t.Errorf("verification beside calls: %+v", vr)
	}
	if line := vr.summary(); !strings.Contains(line, "receipts verified in") {
		t.Errorf("summary: %s", line)
	}
}

func TestParseOptions_Volume(t *testing.T) {
	t.Parallel()
	o, err := parseOptions([]string{"-url", "http://x", "-volume", "20000"})
	if err != nil || o.volume != 20_000 || o.volumeOnly {
		t.Fatalf("-volume 20000: %+v %v", o, err)
	}
	if o, err := parseOptions([]string{"-url", "http://x"}); err != nil || o.volume != 0 {
		t.Errorf("default: volume %d (%v), want 0: off", o.volume, err)
	}
	for _, args := range [][]string{{"-url", "http://x", "-volume", "999"}, {"-url", "http://x", "-volume-only"},
		{"-url", "http://x", "-volume", "20000", "-volume-only", "-doc", "docs/performance.md"}, {"-url", "http://x", "-volume", "20000", "-volume-keep"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}
