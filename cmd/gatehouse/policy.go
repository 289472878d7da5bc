package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policyfile"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// replayFailed is a replay in which a --fail-on kind occurred (exit
// status 3).
type replayFailed string

func (r replayFailed) Error() string { return string(r) }

// policyCommand is "policy check FILE" and "policy replay FILE".
func policyCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "check" && args[0] != "replay") {
		return usageError("policy needs check or replay")
	}
	if args[0] == "check" {
		return policyCheckCommand(args[1:], getenv, stdout, stderr)
	}
	return policyReplayCommand(ctx, args[1:], getenv, stdout, stderr)
}

// splitFile takes the one FILE argument out of args, wherever it stands
// among the flags; valued names the flags that take a value.
func splitFile(cmd string, args []string, valued ...string) (string, []string, error) {
	var file string
	var flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			if a == "--" && i+1 < len(args) {
				i++
				a = args[i]
			}
			if file != "" {
				return "", nil, usageError(fmt.Sprintf("%s takes one FILE (got %s and %s)", cmd, file, a))
			}
			file = a
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && i+1 < len(args) {
			for _, v := range valued {
				if name == v {
					i++
					flags = append(flags, args[i])
				}
			}
		}
	}
	if file == "" {
		return "", nil, usageError(cmd + " needs the policy FILE")
	}
	return file, flags, nil
}

// policyCheckCommand is "policy check FILE": the file parsed and checked
// by the server's own loader, with the server's environment (a header's
// ${NAME} must be set). It prints "ok" and what the file declares, or
// fails (exit 1) with every error and its line.
func policyCheckCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	file, flags, err := splitFile("policy check", args, "data-dir")
	if err != nil {
		return err
	}
	cfg, err := loadConfig("policy check", flags, getenv, stderr)
	if err != nil {
		return err
	}
	registry, err := tools.Builtin()
	if err != nil {
		return err
	}
	// Read and checked exactly as the server loads it at start and on a
	// reload: the built-in tools' overrides and the caller tools as
	// declarations, the upstreams' names.
	f, _, err := policyfile.Read(file, registry, cfg.Getenv)
	if err != nil {
		// The loader's errors name the file and each its line.
		return errors.New(strings.Join(replay.FileErrors(err), "\n"))
	}
	overrides, shadows := len(f.Tools), 0
	for _, o := range f.Tools {
		if o.Shadow() {
			shadows++
		}
	}
	for _, u := range f.Upstreams {
		overrides += len(u.Tools)
		for _, o := range u.Tools {
			if o.Shadow() {
				shadows++
			}
		}
	}
	fmt.Fprintf(stdout, "ok: %s declares %s and %s", file, plural(len(f.Upstreams), "upstream"), plural(overrides, "tool override"))
	if shadows > 0 {
		fmt.Fprintf(stdout, " (%d in shadow mode: evaluated on live calls, not enforced)", shadows)
	}
	if len(f.Settings.Names()) > 0 {
		fmt.Fprintf(stdout, "; %s", f.Settings)
	}
	fmt.Fprintln(stdout)
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// replayJSON is the report --json prints: the replay's report and what
// --fail-on asked and found.
type replayJSON struct {
	File string `json:"file"`
	replay.Report
	FailOn []replay.Kind `json:"fail_on"`
	Failed []replay.Kind `json:"failed"`
}

// policyReplayCommand is "policy replay FILE --since 7d [--workspace W]
// [--json] [--fail-on KIND,...] [--examples N]": every recorded call of
// the period decided again under FILE, in a read-only transaction; exit 3
// when a --fail-on kind occurred.
func policyReplayCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	file, flags, err := splitFile("policy replay", args, "data-dir", "since", "workspace", "fail-on", "examples")
	if err != nil {
		return err
	}
	var since, workspace, failOn string
	var asJSON bool
	var examples int
	cfg, err := loadConfig("policy replay", flags, getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&since, "since", "7d", "how far back to read: a Go duration (36h) or days (7d)")
		fs.StringVar(&workspace, "workspace", "", "one workspace, by id, slug or name (default: every workspace)")
		fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
		fs.StringVar(&failOn, "fail-on", "", "exit 3 when any of these kinds occurs: newly-asks, newly-allowed, newly-allowed-destructive, newly-blocked, restated, changed")
		fs.IntVar(&examples, "examples", replay.DefaultExamples, "example call ids kept per tool, class and kind (0 to 100)")
	})
	if err != nil {
		return err
	}
	period, err := parseSince(since)
	if err != nil {
		return usageError("--since " + err.Error())
	}
	if examples < 0 || examples > replay.MaxExamples {
		return usageError(fmt.Sprintf("--examples must be from 0 to %d", replay.MaxExamples))
	}
	var kinds []replay.Kind
	if failOn != "" {
		if kinds, err = replay.ParseKinds(failOn); err != nil {
			return usageError("--fail-on: " + err.Error())
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	registry, err := tools.Builtin()
	if err != nil {
		return err
	}
	candidate, err := replay.ParseFile(data, registry.Classes())
	if err != nil {
		var lines []string
		for _, msg := range replay.FileErrors(err) {
			lines = append(lines, "policy file "+file+": "+msg)
		}
		return errors.New(strings.Join(lines, "\n"))
	}
	return withPool(ctx, cfg, stderr, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		svc := replay.NewService(pool, registry)
		now := time.Now()
		o := replay.Options{Since: now.Add(-period), Until: now, Examples: examples}
		if workspace != "" {
			id, err := svc.FindWorkspace(ctx, workspace)
			var ae *apperr.Error
			if errors.As(err, &ae) {
				return usageError("--workspace: " + ae.Message)
			}
			if err != nil {
				return err
			}
			o.WorkspaceID = id
		}
		r, err := svc.Replay(ctx, candidate, o)
		if err != nil {
			return err
		}
		failed := r.Occurred(kinds)
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			out := replayJSON{File: file, Report: r, FailOn: kinds, Failed: failed}
			if out.FailOn == nil {
				out.FailOn = []replay.Kind{}
			}
			if out.Failed == nil {
				out.Failed = []replay.Kind{}
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
		} else if err := replay.WriteText(stdout, r, file); err != nil {
			return err
		}
		if len(failed) > 0 {
			var parts []string
			for _, k := range failed {
				parts = append(parts, fmt.Sprintf("%s (%d)", k, r.Totals.Of(k)))
			}
			return replayFailed("policy replay: --fail-on: " + strings.Join(parts, ", "))
		}
		return nil
	})
}

// parseSince reads a period: a Go duration (36h, 90m) or whole days (7d).
func parseSince(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 || days > 3660 {
			return 0, fmt.Errorf("%q: days must be a whole number from 1 to 3660, such as 7d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return 0, fmt.Errorf("%q must be a positive duration (36h, 90m) or a number of days (7d)", s)
		}
	}
	return d, nil
}
