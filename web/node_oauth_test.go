//go:build node

package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// chromium starts headless Chromium (Debian's package, never a download),
// as cmd/gatehouse's browser tests do.
func chromium(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no Chromium at %s (Debian's chromium package; make e2e installs it): %v", path, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // we run as root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	// The browser lives as long as the context it is started on: this one,
	// not a step's.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// browserStep runs actions with their own deadline, and on failure shows
// the page.
func browserStep(t *testing.T, ctx context.Context, name string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		html, herr := chromedp.Run(dctx, chromedp.OuterHTML(chromedp.CSS(`body`)))
		if herr != nil {
			html = "(page unavailable: " + herr.Error() + ")"
		}
		t.Fatalf("%s: %v\npage:\n%s", name, err, html)
	}
}

// The official TypeScript SDK's OAuth client provider connects with
// nothing but /mcp's URL: it reads the protected resource metadata from
// the 401, registers itself, and sends the person to the authorization
// URL; the person signs in and allows read-only access on the consent
// page in Chromium; the redirect brings the code to the client's loopback
// listener, which exchanges it (PKCE), connects, lists the tools and
// calls one. The consent is an agent token of the person's, and the call
// is proposed as theirs.
func TestNode_TSClientOAuthSignsInAndConsentsInTheBrowser(t *testing.T) {
	t.Parallel()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	// Not CookieSecure: the browser reaches the server over plain http.
	e := newEnvConfig(t, dbtest.MustPool(t), registry, web.Config{})
	e.user("ana@example.com", auth.RoleMember)

	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Node.js in %s: run `make mcp-clients` (npm ci there first): %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "oauth-client.mjs", e.url+"/mcp", "records.search",
		`{"query":"acme","rationale":"find the customer's record"}`)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the client ended before %s; stderr:\n%s", what, stderr.String())
			}
			return l
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; stderr:\n%s", what, stderr.String())
		}
		return ""
	}

	var start struct {
		Authorize string `json:"authorize"`
		Error     string `json:"error"`
	}
	if line := next("the authorization URL"); json.Unmarshal([]byte(line), &start) != nil || !strings.HasPrefix(start.Authorize, e.url+"/oauth/authorize?") {
		t.Fatalf("the client did not start the authorization at Gatehouse: %s", line)
	}

	// The person opens the URL, is sent to sign in, comes back to the
	// consent page, and allows read-only access.
	b := chromium(t)
	browserStep(t, b, "open the authorization URL and sign in",
		chromedp.Navigate(start.Authorize),
		chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "ana@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=oauth-consent]`)),
	)
	name, err := chromedp.Run(b, chromedp.Text(chromedp.CSS(`[data-testid=oauth-client-name]`)))
	if err != nil || strings.TrimSpace(name) != "TS SDK Agent" {
		t.Errorf("the consent page names the client %q (%v)", name, err)
	}
	browserStep(t, b, "allow read-only access",
		chromedp.Click(chromedp.CSS(`[data-testid=oauth-access-read]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=oauth-approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`#done`)),
	)

	var got struct {
		Steps    []string `json:"steps"`
		Redirect struct {
			HasCode bool   `json:"hasCode"`
			Iss     string `json:"iss"`
		} `json:"redirect"`
		Scope  string   `json:"scope"`
		Tools  []string `json:"tools"`
		Result struct {
			IsError bool   `json:"isError"`
			Status  string `json:"status"`
		} `json:"result"`
		Error string `json:"error"`
	}
	line := next("the client's outcome")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("the client's output: %v: %s", err, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v; stderr:\n%s", err, stderr.String())
	}
	if got.Error != "" {
		t.Fatalf("the TS client failed: %s\nsteps %v", got.Error, got.Steps)
	}
	if !slices.Equal(got.Steps, []string{"registered", "authorize", "tokens"}) || !got.Redirect.HasCode || got.Redirect.Iss != e.url {
		t.Errorf("the flow: steps %v, redirect %+v", got.Steps, got.Redirect)
	}
	// Read-only: the session lists reads only, and the read runs.
	if got.Scope != "mcp:read" || !slices.Contains(got.Tools, "records.search") || slices.Contains(got.Tools, "records.delete") {
		t.Errorf("scope %q, tools %v", got.Scope, got.Tools)
	}
	if got.Result.IsError || got.Result.Status != "applied" {
		t.Errorf("records.search: %+v", got.Result)
	}

	// The grant is an agent token of ana's, named after the client, and
	// the call was proposed under it.
	var tokenName string
	var calls int
	if err := e.pool.QueryRow(t.Context(), `SELECT t.name, (SELECT count(*) FROM proposals p WHERE p.proposed_by_token_id = t.id AND p.tool = 'records.search')
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE u.email = 'ana@example.com' AND t.kind = 'agent'`).Scan(&tokenName, &calls); err != nil {
		t.Fatal(err)
	}
	if tokenName != "OAuth: TS SDK Agent" || calls != 1 {
		t.Errorf("the grant's token %q made %d calls", tokenName, calls)
	}
}
