package policy

import (
	"math"
	"testing"
	"time"
)

func TestFormatISODuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "PT0S"},
		{time.Hour, "PT1H"},
		{30 * time.Minute, "PT30M"},
		{90 * time.Minute, "PT1H30M"},
		{24 * time.Hour, "PT24H"},
		{time.Hour + time.Second, "PT1H1S"},
		{1500 * time.Millisecond, "PT1.5S"},
		{time.Nanosecond, "PT0.000000001S"},
		{-time.Minute, "-PT1M"},
		{time.Duration(math.MinInt64), "-PT2562047H47M16.854775808S"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := FormatISODuration(tc.d); got != tc.want {
				t.Errorf("FormatISODuration(%v) = %q, want %q", tc.d, got, tc.want)
			}
		})
	}
}

func TestParseISODuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"PT1H", time.Hour},
		{"pt1h", time.Hour},
		{"PT30M", 30 * time.Minute},
		{"PT1H30M", 90 * time.Minute},
		{"PT0S", 0},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT0,5S", 500 * time.Millisecond},
		{"PT1.5H", 90 * time.Minute},
		{"P1D", 24 * time.Hour},
		{"P1DT12H", 36 * time.Hour},
		{"P2W", 14 * 24 * time.Hour},
		{"PT86400S", 24 * time.Hour},
		{"P106751D", 106751 * 24 * time.Hour},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseISODuration(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("ParseISODuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseISODuration_RefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", "P", "PT", "1H", "PT1", "PTH", "P1H", "PT1D", "P1Y", "P1M", "P1Y2M", "-PT1H", "+PT1H",
		"PT1M1H", "PT1H1H", "P1W1D", "P1DT", "PT.5S", "PT5.S", "PT1.5H30M", "PT1..5S", "P1TT1H",
		"PT99999999999999999999S", "P106752D", "PT1H ", " PT1H", "PT1e3S", "PT١H",
	} {
		t.Run(in, func(t *testing.T) {
			if d, err := ParseISODuration(in); err == nil {
				t.Errorf("ParseISODuration(%q) = %v, want an error", in, d)
			}
		})
	}
}

// Every window a rate limit can hold survives the round trip.
func TestISODuration_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, time.Nanosecond, time.Second, time.Minute, time.Hour, 25 * time.Hour,
		7 * 24 * time.Hour, 1234567891011 * time.Nanosecond, time.Duration(math.MaxInt64)} {
		s := FormatISODuration(d)
		got, err := ParseISODuration(s)
		if err != nil || got != d {
			t.Errorf("%v → %q → %v, %v", d, s, got, err)
		}
	}
}
