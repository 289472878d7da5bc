package policy

import (
	"math/rand/v2"
	"testing"
)

func TestPathCeilings(t *testing.T) {
	want := map[Path]State{
		PathAuto:      StateAllowedWithConstraints,
		PathOwner:     StateReviewRequired,
		PathApproval:  StateDeferred,
		PathPerformed: StateHumanOnly,
	}
	for _, p := range Paths {
		if got, ok := p.Ceiling(); !ok || got != want[p] {
			t.Errorf("%s: ceiling %q, want %q", p, got, want[p])
		}
	}
	if _, ok := Path("admin").Ceiling(); ok {
		t.Error("an unknown path has a ceiling")
	}
}

func TestAtEffect_Table(t *testing.T) {
	cases := []struct {
		path          Path
		proposed, now State
		want          Outcome
	}{
		{PathAuto, StateAllowed, StateAllowed, OutcomeRun},
		{PathAuto, StateAllowed, StateAllowedWithConstraints, OutcomeRun},
		{PathAuto, StateAllowed, StateReviewRequired, OutcomeConfirm},
		{PathAuto, StateAllowed, StateDeferred, OutcomeEscalate},
		{PathAuto, StateAllowed, StateHumanOnly, OutcomeRefuse},
		{PathOwner, StateReviewRequired, StateReviewRequired, OutcomeRun},
		{PathOwner, StateReviewRequired, StateAllowed, OutcomeRun},
		// An edit that crosses a threshold, or a high-risk opt-in revoked.
		{PathOwner, StateReviewRequired, StateDeferred, OutcomeEscalate},
		{PathOwner, StateReviewRequired, StateHumanOnly, OutcomeRefuse},
		{PathOwner, StateReviewRequired, StateBlocked, OutcomeRefuse},
		{PathApproval, StateDeferred, StateDeferred, OutcomeRun},
		{PathApproval, StateDeferred, StateHumanOnly, OutcomeRefuse},
		{PathApproval, StateDeferred, StateBlocked, OutcomeRefuse},
		{PathPerformed, StateHumanOnly, StateHumanOnly, OutcomeRun},
		{PathPerformed, StateReviewRequired, StateReviewRequired, OutcomeRefuse},
		{PathPerformed, StateHumanOnly, StateBlocked, OutcomeRefuse},
		{Path("admin"), StateAllowed, StateAllowed, OutcomeRefuse},
		{PathOwner, StateReviewRequired, State("Allowed"), OutcomeRefuse},
	}
	for _, c := range cases {
		t.Run(string(c.path)+"/"+string(c.proposed)+"->"+string(c.now), func(t *testing.T) {
			if got := AtEffect(c.path, c.proposed, c.now); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

// TestAtEffect_NothingRunsAboveItsCeiling draws (path, decision at propose,
// decision at effect) triples, unknown values included, and checks that a
// call runs only within its path's ceiling, that blocked never runs, that
// human_only runs only as the principal's performance, and that whatever
// does not run waits for the right person or is refused.
func TestAtEffect_NothingRunsAboveItsCeiling(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 20))
	paths := append([]Path{"", "admin"}, Paths...)
	states := append([]State{"", "Allowed", "approved"}, States...)
	ran := map[Path]int{}
	for range 20000 {
		path, proposed, now := paths[r.IntN(len(paths))], states[r.IntN(len(states))], states[r.IntN(len(states))]
		out := AtEffect(path, proposed, now)
		fail := func(why string) { t.Fatalf("(%q, %q, %q) → %s: %s", path, proposed, now, out, why) }
		ceiling, ok := path.Ceiling()
		switch out {
		case OutcomeRun:
			ran[path]++
			if !ok || !known(now) || now.Rank() > ceiling.Rank() {
				fail("ran above the path's ceiling")
			}
			if now == StateBlocked {
				fail("a blocked call ran")
			}
			if now == StateHumanOnly && (path != PathPerformed || proposed != StateHumanOnly) {
				fail("a human-only call ran other than as the principal's performance")
			}
		case OutcomeConfirm:
			if now != StateReviewRequired {
				fail("asked the owner for a call that is not review_required")
			}
		case OutcomeEscalate:
			if now != StateDeferred {
				fail("opened a packet for a call that is not deferred")
			}
		case OutcomeRefuse:
		default:
			fail("unknown outcome")
		}
		if ok && known(now) && now.Rank() <= ceiling.Rank() && now != StateBlocked && out != OutcomeRun &&
			(path != PathPerformed || proposed == StateHumanOnly) {
			fail("a call within its ceiling did not run")
		}
	}
	for _, p := range Paths {
		if ran[p] == 0 {
			t.Errorf("no draw ran on %s, so the property proves little", p)
		}
	}
}
