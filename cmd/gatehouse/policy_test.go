package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/replay/replaytest"
)

// policyCLI runs `gatehouse policy args…` and returns its exit status, its
// standard output and its errors.
func policyCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	err := run(context.Background(), append([]string{"policy"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return exitCode(err), out.String(), errOut.String()
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyCheck_OkOrEveryErrorWithItsLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"GATEHOUSE_DATA_DIR": dir, "UP_TOKEN": "secret"}
	good := writeFile(t, dir, "good.yaml", replaytest.TightenFile+"    headers:\n      Authorization: Bearer ${UP_TOKEN}\n")
	if code, out, errs := policyCLI(t, env, "check", good); code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "1 upstream and 1 tool override") {
		t.Fatalf("a good file: exit %d\n%s%s", code, out, errs)
	}
	// As the server loads it: an unset ${NAME} is an error too.
	if code, _, errs := policyCLI(t, map[string]string{"GATEHOUSE_DATA_DIR": dir}, "check", good); code != 1 || !strings.Contains(errs, "line 8") || !strings.Contains(errs, "UP_TOKEN") {
		t.Fatalf("an unset header variable: exit %d\n%s", code, errs)
	}
	bad := writeFile(t, dir, "bad.yaml", "upstreams:\n  - name: up\n    url: http://127.0.0.1:9/mcp\n    tools:\n      fetch:\n        effect: sideways\n")
	if code, out, errs := policyCLI(t, env, "check", bad); code != 1 || out != "" || !strings.Contains(errs, "line 6") || !strings.Contains(errs, "effect must be read, mutate or destructive") {
		t.Fatalf("a bad file: exit %d\n%s%s", code, out, errs)
	}
	if code, _, _ := policyCLI(t, env, "check", filepath.Join(dir, "missing.yaml")); code != 1 {
		t.Fatalf("a missing file: exit %d", code)
	}
	for _, args := range [][]string{{"check"}, {"check", good, good}, {"check", good, "--nope"}, {"lint", good}, {}} {
		if code, _, errs := policyCLI(t, env, args...); code != 2 {
			t.Fatalf("policy %q: exit %d\n%s", args, code, errs)
		}
	}
}

func TestPolicyReplay_ReportsJSONAndFailsOnWhatItIsTold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := dbtest.MustURL(t)
	pool, err := db.NewPool(context.Background(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	registry := replaytest.MustRegistry(t)
	replaytest.MustPin(t, pool)
	replaytest.MustMember(t, pool, "owner@example.com")
	rec := replaytest.MustRecord(t, pool, registry, "owner@example.com")
	env := map[string]string{"DATABASE_URL": url, "GATEHOUSE_DATA_DIR": dir}
	tighten := writeFile(t, dir, "tighten.yaml", replaytest.TightenFile)
	loosen := writeFile(t, dir, "loosen.yaml", replaytest.LoosenFile)

	// The table, by default.
	code, out, errs := policyCLI(t, env, "replay", tighten, "--since", "1d")
	if code != 0 || !strings.Contains(out, "Replayed 10 calls of every workspace") || !strings.Contains(out, "4 newly ask a person") ||
		!strings.Contains(out, "up.fetch  read.context") || !strings.Contains(out, rec.Fetch[0].String()) {
		t.Fatalf("table: exit %d\n%s%s", code, out, errs)
	}

	// JSON, one workspace by its slug, flags before the file.
	code, out, errs = policyCLI(t, env, "replay", "--json", "--since=36h", "--workspace", "default", "--examples", "1", loosen)
	var r struct {
		File        string  `json:"file"`
		WorkspaceID *string `json:"workspace_id"`
		Totals      struct {
			Calls          int `json:"calls"`
			NewlyAllowed   int `json:"newly_allowed"`
			ApprovalsSaved int `json:"approvals_saved"`
		} `json:"totals"`
		Groups []struct {
			Tool     string                       `json:"tool"`
			Covered  bool                         `json:"covered"`
			Examples map[string][]json.RawMessage `json:"examples"`
		} `json:"groups"`
		FailOn []string `json:"fail_on"`
		Failed []string `json:"failed"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("json: exit %d %v\n%s%s", code, err, out, errs)
	}
	if r.File != loosen || r.WorkspaceID == nil || r.Totals.Calls != 10 || r.Totals.NewlyAllowed != 3 || r.Totals.ApprovalsSaved != 3 || r.Failed == nil {
		t.Fatalf("json report %s", out)
	}
	for _, g := range r.Groups {
		if g.Tool == "up.write" && (!g.Covered || len(g.Examples["newly-allowed"]) != 1 || !strings.Contains(string(g.Examples["newly-allowed"][0]), rec.Rejected.String())) {
			t.Fatalf("up.write %+v", g)
		}
	}

	// --fail-on: exit 3 only for a kind that occurred, the report printed all the same.
	code, out, errs = policyCLI(t, env, "replay", loosen, "--fail-on", "newly-allowed-destructive,newly-blocked", "--json")
	if code != 0 || !strings.Contains(out, `"failed": []`) {
		t.Fatalf("nothing destructive newly allowed: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = policyCLI(t, env, "replay", loosen, "--fail-on", "newly-blocked,newly-allowed")
	if code != 3 || !strings.Contains(out, "3 newly allowed") || !strings.Contains(errs, "newly-allowed (3)") {
		t.Fatalf("newly allowed: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := policyCLI(t, env, "replay", tighten, "--fail-on", "newly-asks", "--json"); code != 3 {
		t.Fatalf("newly asks: exit %d\n%s", code, errs)
	}

	// Bad flags are usage errors; a bad file names its line.
	for _, args := range [][]string{
		{"replay", tighten, "--since", "yesterday"}, {"replay", tighten, "--since", "-3h"}, {"replay", tighten, "--since", "0d"},
		{"replay", tighten, "--fail-on", "newly-strange"}, {"replay", tighten, "--examples", "1000"}, {"replay", "--since", "7d"},
		{"replay", tighten, "--workspace", "nobody"},
	} {
		if code, _, errs := policyCLI(t, env, args...); code != 2 {
			t.Fatalf("policy %q: exit %d\n%s", args, code, errs)
		}
	}
	bad := writeFile(t, dir, "bad.yaml", "upstreams:\n  - name: up\n    url: http://127.0.0.1:9/mcp\n    tools:\n      fetch:\n        risk: extreme\n")
	if code, _, errs := policyCLI(t, env, "replay", bad); code != 1 || !strings.Contains(errs, "line 6") {
		t.Fatalf("a bad file: exit %d\n%s", code, errs)
	}
	// The period really bounds what is read.
	if _, out, _ := policyCLI(t, env, "replay", tighten, "--since", "1ns", "--json"); !strings.Contains(out, `"calls": 0`) {
		t.Fatalf("a period with no calls:\n%s", out)
	}
	if !slices.Contains(rec.All(), rec.Rejected) {
		t.Fatal("the fixture lost its rejected call")
	}
}
