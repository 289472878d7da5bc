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

func TestWeekly_CountsEveryWeekFromMonday(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) // a Sunday
	since := now.AddDate(0, 0, -14)
	items := []Item{{CreatedAt: now}, {CreatedAt: now.AddDate(0, 0, -6)}, {CreatedAt: now.AddDate(0, 0, -7)}, {CreatedAt: now.AddDate(0, 0, -30)}}
	weeks := Weekly(items, since, now)
	if len(weeks) != 3 || weeks[0].Start.Weekday() != time.Monday {
		t.Fatalf("weeks: %v", weeks)
	}
	if weeks[0].Count != 0 || weeks[1].Count != 1 || weeks[2].Count != 2 {
		t.Errorf("counts: %v", weeks)
	}
}

func TestByTool_MostFirst(t *testing.T) {
	got := ByTool([]Item{{ToolCalled: "b", ToolKnown: true}, {ToolCalled: "a"}, {ToolCalled: "b", ToolKnown: true}, {}})
	if len(got) != 3 || got[0].Tool != "b" || got[0].Count != 2 || !got[0].Known || got[1].Tool != "" || got[2].Tool != "a" {
		t.Errorf("%+v", got)
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
