//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// axeViolation is the part of an axe-core result a failure names.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
		HTML    string `json:"html"`
	} `json:"nodes"`
}

// axeCheck runs axe-core on the page ctx shows and returns its violations.
// The page's CSP forbids inline scripts, not the debugger's evaluation:
// axe is injected into the page as is.
func axeCheck(t *testing.T, ctx context.Context, name string) []axeViolation {
	t.Helper()
	src, err := os.ReadFile("testdata/axe/axe.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](string(src)+"\n;true")); err != nil {
		t.Fatalf("inject axe on %s: %v", name, err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe on %s: %v", name, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Fatalf("axe result on %s: %v", name, err)
	}
	return vs
}

// axe-core (vendored under testdata/axe for the tests only; the server
// never serves it) checks every page in the light and the dark theme; a
// serious or critical violation fails, naming the rule and the node.
func TestBrowser_AccessibilityAxeOnEveryPageInBothThemes(t *testing.T) {
	d := seedLook(t)
	ctx := d.signedIn(t)
	step(t, ctx, "desktop viewport", chromedp.EmulateViewport(1280, 900))
	check := func(name string) []axeViolation { t.Helper(); return axeCheck(t, ctx, name) }
	// The harness finds what it must: an unlabelled input is critical.
	step(t, ctx, "self-check", chromedp.Navigate(d.s.URL+"/"), chromedp.WaitVisible(chromedp.CSS("main")))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`document.querySelector('main').insertAdjacentHTML('beforeend', '<input id="unlabelled">'); true`)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range check("self-check") {
		found = found || (v.ID == "label" && v.Impact == "critical")
	}
	if !found {
		t.Fatal("axe did not report an unlabelled input: the harness checks nothing")
	}
	for _, theme := range []string{"light", "dark"} {
		step(t, ctx, theme+" theme", colorScheme(theme))
		for _, p := range d.pages() {
			step(t, ctx, theme+" "+p.name, chromedp.Navigate(d.s.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			dark, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`matchMedia('(prefers-color-scheme: dark)').matches`))
			if err != nil || dark != (theme == "dark") {
				t.Fatalf("%s theme on %s: prefers dark = %v (%v)", theme, p.name, dark, err)
			}
			vs := check(p.name)
			t.Logf("%s theme, %s: %d violations of any impact", theme, p.name, len(vs))
			for _, v := range vs {
				if v.Impact != "serious" && v.Impact != "critical" {
					continue
				}
				var nodes []string
				for i, n := range v.Nodes {
					if i == 5 {
						nodes = append(nodes, fmt.Sprintf("… and %d more", len(v.Nodes)-5))
						break
					}
					nodes = append(nodes, fmt.Sprintf("%v %s (%s)", n.Target, n.HTML, strings.ReplaceAll(n.Summary, "\n", " ")))
				}
				t.Errorf("%s theme, %s (%s): %s %s: %s\n  %s", theme, p.name, p.path, v.Impact, v.ID, v.Help, strings.Join(nodes, "\n  "))
			}
		}
	}
}

// The first Tab reaches "Skip to content", shown with a focus ring; it
// moves focus to the page's main content.
func TestBrowser_SkipLinkAndVisibleFocus(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    lookAdmin,
		"GATEHOUSE_ADMIN_PASSWORD": lookPassword,
	})
	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, lookAdmin, lookPassword)
	step(t, ctx, "tab to the skip link",
		chromedp.Navigate(s.URL+"/conversations"),
		chromedp.WaitVisible(chromedp.CSS("main")),
		chromedp.KeyEvent(kb.Tab),
	)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const el = document.activeElement, r = el.getBoundingClientRect(), cs = getComputedStyle(el);
		return {text: el.textContent, top: r.top, outline: cs.outlineStyle, width: parseFloat(cs.outlineWidth)};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got["text"] != "Skip to content" || got["top"].(float64) < 0 || got["outline"] == "none" || got["width"].(float64) < 2 {
		t.Fatalf("the first Tab reaches %v", got)
	}
	step(t, ctx, "follow it", chromedp.KeyEvent(kb.Enter))
	focus, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	if err != nil || focus != "main" {
		t.Fatalf("after the skip link the focus is on #%s (%v)", focus, err)
	}
}
