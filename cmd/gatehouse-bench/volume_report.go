package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The volume phase's targets (issue 32). They are reported with a mark,
// never enforced: the run does not fail on them.
const (
	targetRatio    = 3.0                   // at volume, at most this many times the empty database's median
	targetMedian   = 50 * time.Millisecond // and under this
	targetHotBytes = 200 * 1000            // the hot conversation's page
	targetPeakRSS  = 300 * 1000 * 1000     // bytes: the server's peak resident memory through the phase
)

// volumeResult is what the volume phase measured.
type volumeResult struct {
	Plan   volumePlan
	Fill   fillResult
	Pages  []pageResult
	Seeded int // template actions seeded through the API
	// The server's resident memory (KiB): its peak (VmHWM) once the
	// readers signed in (argon2id takes its memory per sign-in), after
	// timing the empty database, and through the whole phase.
	PeakRSSSignedIn, PeakRSSEmpty, PeakRSS int64
	// Verify is the full verification beside calls (nil: not run).
	Verify *verifyResult
}

// pageResult is one page, timed empty and at volume.
type pageResult struct {
	Name, Route   string
	Empty, Volume pageTiming
}

// ratio is the volume median over the empty one (0: not measured).
func (p pageResult) ratio() float64 {
	if !p.Empty.ok() || !p.Volume.ok() || p.Empty.Median <= 0 {
		return 0
	}
	return float64(p.Volume.Median) / float64(p.Empty.Median)
}

// verdict marks a page against the targets: at volume its median at most
// targetRatio times the empty one and under targetMedian.
func (p pageResult) verdict() string {
	switch {
	case !p.Volume.ok():
		return "miss: " + timingNote(p.Volume)
	case !p.Empty.ok():
		return "miss: empty database: " + timingNote(p.Empty)
	}
	var why []string
	if r := p.ratio(); r > targetRatio {
		why = append(why, fmt.Sprintf("%.1f× > %.0f×", r, targetRatio))
	}
	if p.Volume.Median >= targetMedian {
		why = append(why, fmt.Sprintf("%s ≥ %s", fmtDur(p.Volume.Median), fmtDur(targetMedian)))
	}
	if len(why) > 0 {
		return "miss: " + strings.Join(why, ", ")
	}
	return "pass"
}

// timingNote says what went wrong with a page's requests, if anything.
func timingNote(t pageTiming) string {
	switch {
	case t.TimedOut:
		return fmt.Sprintf("timed out (%s)", pageTimeout)
	case t.Err != "":
		return "failed: " + t.Err
	case t.Status != 0:
		return fmt.Sprintf("status %d", t.Status)
	case len(t.Samples) == 0:
		return "not measured"
	case len(t.Samples) < pageSamples:
		return fmt.Sprintf("%d samples", len(t.Samples))
	}
	return ""
}

func fmtMedian(t pageTiming) string {
	if len(t.Samples) == 0 {
		if t.TimedOut {
			return "> " + pageTimeout.String()
		}
		return "-"
	}
	return fmtDur(t.Median)
}

func fmtBytes(n int) string {
	switch {
	case n >= 1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

func mark(ok bool) string {
	if ok {
		return "pass"
	}
	return "miss"
}

func (v *volumeResult) hotPage() (pageResult, bool) {
	for _, p := range v.Pages {
		if p.Name == hotPage {
			return p, true
		}
	}
	return pageResult{}, false
}

var volumeHeader = []string{"page", "route", "empty p50", "volume p50", "ratio", "bytes at volume", "target: ≤ 3× and < 50 ms"}

func (v *volumeResult) cells(p pageResult) []string {
	ratio := "-"
	if r := p.ratio(); r > 0 {
		ratio = fmt.Sprintf("%.1f×", r)
	}
	return []string{p.Name, "`" + p.Route + "`", fmtMedian(p.Empty), fmtMedian(p.Volume), ratio, fmtBytes(p.Volume.Bytes), p.verdict()}
}

// summary is the lines under the table: what the fill wrote and the
// targets that are not per page.
func (v *volumeResult) summary() []string {
	pl, f := v.Plan, v.Fill
	var rows []string
	for _, t := range fillTables {
		if n := f.Rows[t.name]; n > 0 {
			rows = append(rows, fmt.Sprintf("%s %d", t.name, n))
		}
	}
	lines := []string{
		fmt.Sprintf("Fill: %d calls in %d conversations (%d in the hot one), %d pending approval packets, %d evidence rows, %d feedback items, %d notebooks; "+
			"copies of %d actions seeded through the API; %s writing (%.0f calls/s), %s VACUUM (ANALYZE)",
			f.Calls, pl.Conversations, pl.HotCalls, pl.PendingPackets, pl.Evidence, pl.Feedback, pl.Notebooks, v.Seeded,
			f.Took.Round(100*time.Millisecond), float64(f.Calls)/max(f.Took.Seconds(), 1e-9), f.Vacuum.Round(100*time.Millisecond)),
		"Rows written: " + strings.Join(rows, ", "),
	}
	if hot, ok := v.hotPage(); ok && hot.Volume.Bytes > 0 {
		lines = append(lines, fmt.Sprintf("Hot conversation's page at volume: %s (target under %s): %s",
			fmtBytes(hot.Volume.Bytes), fmtBytes(targetHotBytes), mark(hot.Volume.Bytes < targetHotBytes)))
	}
	if v.PeakRSS > 0 {
		mb := func(kib int64) string { return fmtBytes(int(kib * 1024)) }
		lines = append(lines, fmt.Sprintf("Server's peak RSS through the phase: %s (%s once signed in, %s before the fill; target under %s): %s",
			mb(v.PeakRSS), mb(v.PeakRSSSignedIn), mb(v.PeakRSSEmpty), fmtBytes(targetPeakRSS), mark(v.PeakRSS*1024 < targetPeakRSS)))
	}
	if vr := v.Verify; vr != nil {
		lines = append(lines, vr.summary())
	}
	passed := 0
	for _, p := range v.Pages {
		if p.verdict() == "pass" {
			passed++
		}
	}
	return append(lines, fmt.Sprintf("Pages within the targets: %d of %d", passed, len(v.Pages)))
}

func (v *volumeResult) printText(w io.Writer) {
	fmt.Fprintf(w, "\nVolume phase (%d calls): every page and list API, median of sequential GETs, empty database and at volume\n", v.Plan.Calls)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(volumeHeader, "\t"))
	for _, p := range v.Pages {
		c := v.cells(p)
		c[1] = strings.Trim(c[1], "`")
		fmt.Fprintln(tw, strings.Join(c, "\t"))
	}
	tw.Flush()
	for _, l := range v.summary() {
		fmt.Fprintln(w, l+".")
	}
}

// markdown is the volume phase's section of docs/performance.md.
func (v *volumeResult) markdown(b io.Writer) {
	fmt.Fprintf(b, "\n### Pages at volume (`BENCH_VOLUME=%d`)\n\n", v.Plan.Calls)
	fmt.Fprintf(b, "Each page's median over up to %d sequential GETs, on the empty database and after the fill, by the same server. "+
		"The targets are marked, not enforced.\n\n", pageSamples)
	fmt.Fprintf(b, "| %s |\n|---|---|---:|---:|---:|---:|---|\n", strings.Join(volumeHeader, " | "))
	for _, p := range v.Pages {
		fmt.Fprintf(b, "| %s |\n", strings.Join(v.cells(p), " | "))
	}
	fmt.Fprintln(b)
	for _, l := range v.summary() {
		fmt.Fprintf(b, "- %s.\n", l)
	}
}
