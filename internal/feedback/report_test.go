package feedback

import (
	"bytes"
	"testing"
	"time"
)

func TestCanMove_FollowsTheWorkflowOnly(t *testing.T) {
	allowed := map[string]bool{"new>triaged": true, "triaged>planned": true, "triaged>done": true, "triaged>wontfix": true,
		"planned>done": true, "planned>wontfix": true}
	for _, from := range Statuses {
		for _, to := range append(Statuses, "", "bogus") {
			t.Run(from+">"+to, func(t *testing.T) {
				if got := CanMove(from, to); got != allowed[from+">"+to] {
					t.Errorf("CanMove = %v", got)
				}
			})
		}
	}
}

func TestFillWeeks_EveryWeekFromMondayZerosIncluded(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) // a Sunday
	since := now.AddDate(0, 0, -14)
	mon := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	weeks := fillWeeks(map[time.Time]int{mon(16): 2, mon(9): 1, mon(2): 7}, since, now)
	if len(weeks) != 3 || weeks[0].Start != mon(2) || weeks[0].Start.Weekday() != time.Monday {
		t.Fatalf("weeks: %v", weeks)
	}
	if weeks[0].Count != 7 || weeks[1].Count != 1 || weeks[2].Count != 2 {
		t.Errorf("counts: %v", weeks)
	}
	if weeks := fillWeeks(nil, since, now); len(weeks) != 3 || weeks[1].Count != 0 {
		t.Errorf("no counts: %v", weeks)
	}
}

func TestFillWeeks_ShowsAtMostTheLatestWeeks(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	weeks := fillWeeks(nil, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), now)
	if len(weeks) != MaxChartWeeks || weeks[len(weeks)-1].Start != weekStart(now) {
		t.Errorf("%d weeks ending %v, want %d ending %v", len(weeks), weeks[len(weeks)-1].Start, MaxChartWeeks, weekStart(now))
	}
}

func TestWriteCSV_QuotesFormulaCells(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteCSV(&buf, []Item{{AttemptedAction: "=1+1", ExpectedOutcome: "-x", ActualOutcome: "plain", ErrorSeen: "\t=cmd", Rationale: "@me"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"'=1+1", "'-x", ",plain,", "'\t=cmd", "'@me"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("missing %q in %s", want, buf.String())
		}
	}
}
