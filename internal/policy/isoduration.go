package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ISO 8601 durations, the subset the Trust Graduation Protocol's
// rate_limit windows need ("PT1H"): weeks, days, hours, minutes and
// seconds. A day is 24 hours here, since a rate window is elapsed time;
// years and months have no fixed length, so they are refused rather than
// guessed.

// FormatISODuration writes d in hours, minutes and seconds, the largest
// units first and zero units left out: PT1H, PT1H30M, PT24H, PT0.5S; zero
// is PT0S. A negative duration (never a window) gets a leading minus, as
// ISO 8601-2 writes it.
func FormatISODuration(d time.Duration) string {
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = uint64(-(d + 1)) + 1 // math.MinInt64 has no positive twin
	}
	b.WriteString("PT")
	h, rest := u/uint64(time.Hour), u%uint64(time.Hour)
	m, rest := rest/uint64(time.Minute), rest%uint64(time.Minute)
	s, ns := rest/uint64(time.Second), rest%uint64(time.Second)
	if h > 0 {
		b.WriteString(strconv.FormatUint(h, 10) + "H")
	}
	if m > 0 {
		b.WriteString(strconv.FormatUint(m, 10) + "M")
	}
	if s > 0 || ns > 0 || u == 0 {
		b.WriteString(strconv.FormatUint(s, 10))
		if ns > 0 {
			b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", ns), "0"))
		}
		b.WriteString("S")
	}
	return b.String()
}

// ParseISODuration reads an ISO 8601 duration of weeks (PnW, alone), or
// of days, hours, minutes and seconds (P1D, PT1H, PT1H30M, P1DT12H,
// PT0.5S). Letters may be in either case (RFC 3339's ABNF is
// case-insensitive); the last unit given may have a fraction (PT1.5H, with
// "." or ","). Years, months, a sign, an empty duration ("P", "PT") and a
// value beyond what a time.Duration holds (about 292 years) are errors.
func ParseISODuration(s string) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("policy: %q is not an ISO 8601 duration: %s", s, why)
	}
	in := strings.ToUpper(s)
	if !strings.HasPrefix(in, "P") {
		return bad("it must start with P")
	}
	in = in[1:]
	if in == "" {
		return bad("it has no value")
	}
	var (
		total    time.Duration
		timePart bool
		units    int
		last     byte // the unit last read, to keep them in order
		fraction bool
	)
	order := map[byte]int{'W': 1, 'D': 2, 'H': 3, 'M': 4, 'S': 5}
	for in != "" {
		if in[0] == 'T' {
			if timePart {
				return bad("T appears twice")
			}
			timePart, in = true, in[1:]
			if in == "" {
				return bad("T must be followed by hours, minutes or seconds")
			}
			continue
		}
		if fraction {
			return bad("only the last unit may have a fraction")
		}
		i := 0
		for i < len(in) && (in[i] >= '0' && in[i] <= '9' || in[i] == '.' || in[i] == ',') {
			i++
		}
		if i == 0 || i == len(in) {
			return bad("each number must be followed by its unit")
		}
		num, unit := strings.ReplaceAll(in[:i], ",", "."), in[i]
		in = in[i+1:]
		if num[0] == '.' || num[len(num)-1] == '.' || strings.Count(num, ".") > 1 {
			return bad(fmt.Sprintf("%q is not a number", num))
		}
		whole, frac, _ := strings.Cut(num, ".")
		fraction = frac != ""
		n, err := strconv.ParseInt(whole, 10, 64)
		if err != nil {
			return bad("it is too long")
		}
		var size time.Duration
		switch {
		case unit == 'Y' && !timePart, unit == 'M' && !timePart:
			return bad("years and months have no fixed length; use weeks, days or hours")
		case unit == 'W' && !timePart:
			size = 7 * 24 * time.Hour
		case unit == 'D' && !timePart:
			size = 24 * time.Hour
		case unit == 'H' && timePart:
			size = time.Hour
		case unit == 'M' && timePart:
			size = time.Minute
		case unit == 'S' && timePart:
			size = time.Second
		default:
			return bad(fmt.Sprintf("unit %c is not known there", unit))
		}
		if order[unit] <= order[last] {
			return bad("the units must come once each, largest first")
		}
		if last == 'W' || (unit == 'W' && units > 0) {
			return bad("weeks cannot be combined with other units")
		}
		last, units = unit, units+1
		// Whole units exactly, in integers; only a fraction is rounded
		// (to the nanosecond).
		if n > (math.MaxInt64-int64(total))/int64(size) {
			return bad("it is too long")
		}
		total += time.Duration(n) * size
		if fraction {
			f, err := strconv.ParseFloat("0."+frac, 64)
			if err != nil {
				return bad(fmt.Sprintf("%q is not a number", num))
			}
			part := time.Duration(math.Round(f * float64(size)))
			if total > math.MaxInt64-part {
				return bad("it is too long")
			}
			total += part
		}
	}
	if units == 0 {
		return bad("it has no value")
	}
	return total, nil
}
