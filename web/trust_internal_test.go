package web

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/trust"
)

// The chart stays inside its box with finite numbers, whatever the
// posterior: the prior, a narrow peak near 1, a mass near 0, a threshold
// at either edge.
func TestDensityChart_FiniteAndInsideItsBox(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		tally trust.Tally
		th    trust.Threshold
	}{
		{"the prior", trust.Tally{}, trust.DefaultThreshold},
		{"a narrow peak near 1", trust.Tally{Positive: 85000, Negative: 3, Samples: 100003}, trust.Threshold{CILow: 0.99, MinSamples: 10}},
		{"a mass near 0", trust.Tally{Negative: 5000, Samples: 5000}, trust.Threshold{CILow: 0.01, MinSamples: 10}},
		{"a middling class", trust.Tally{Positive: 8.5, Negative: 2, Samples: 12}, trust.Threshold{CILow: 0.5, MinSamples: 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := trust.ComputePosterior("email.send.external", c.tally, c.th, false)
			ch := densityChart(p)
			all := strings.Join([]string{ch.Curve, ch.Band, ch.ThresholdX, ch.IntervalMid, ch.Title}, " ")
			if strings.Contains(all, "NaN") || strings.Contains(all, "Inf") {
				t.Fatalf("not finite: %s", all)
			}
			for _, f := range strings.FieldsFunc(ch.Curve+" "+ch.Band, func(r rune) bool { return r == ' ' || r == 'M' || r == 'L' || r == 'Z' }) {
				v, err := strconv.ParseFloat(f, 64)
				if err != nil || v < 0 || v > chartWidth {
					t.Fatalf("coordinate %q outside the box", f)
				}
			}
			if n := strings.Count(ch.Curve, "L"); n < chartPoints {
				t.Fatalf("the curve has %d segments", n)
			}
			// The peak reaches the top of the plot: the mode is sampled.
			if !strings.Contains(ch.Curve, " "+strconv.FormatFloat(chartTop, 'f', -1, 64)+" ") && !strings.HasSuffix(ch.Curve, " "+strconv.FormatFloat(chartTop, 'f', -1, 64)) {
				t.Fatalf("the peak does not reach the top: %s", ch.Curve)
			}
			if !strings.HasPrefix(ch.Title, "email.send.external: posterior Beta(") || ch.ID != "chart-email-send-external" {
				t.Fatalf("title %q id %q", ch.Title, ch.ID)
			}
		})
	}
}
