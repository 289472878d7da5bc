//go:build e2e

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// browser starts headless Chromium (Debian's package, never a download).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
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
	return ctx
}

func TestBrowser_SignInSeesHomePage(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")
	email := mustText(t, ctx, `[data-testid=user-email]`)
	role := mustText(t, ctx, `[data-testid=home-role]`)
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if email != "root@example.com" || role != "admin" || !strings.Contains(title, "Home") {
		t.Fatalf("home shows email %q role %q title %q", email, role, title)
	}
}

func TestBrowser_WrongPasswordShowsMessage(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	ctx := browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/signin"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "root@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "not the password"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=signin-error]`)),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	msg := mustText(t, ctx, `[data-testid=signin-error]`)
	if msg != "The email or password is wrong." {
		t.Fatalf("message = %q", msg)
	}
}

// signInBrowser signs in through the sign-in page and waits for the header.
func signInBrowser(t *testing.T, ctx context.Context, base, email, password string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=user-email]`)),
	)
	if err != nil {
		t.Fatalf("sign in as %s in the browser: %v", email, err)
	}
}

// mustText returns the visible text of the first element matching css.
// Live pages re-render fragments from the database (an answer's swap, then
// the event feed's), so the element read may be the one just replaced
// (gone from the document, or empty): the read is tried again for a
// moment, on whatever now matches css.
func mustText(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	for try := 0; ; try++ {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
		replaced := err != nil && strings.Contains(err.Error(), "No node")
		if err != nil && (!replaced || try == 20) {
			t.Fatalf("text of %s: %v", css, err)
		}
		if err == nil && (strings.TrimSpace(s) != "" || try == 20) {
			return strings.TrimSpace(s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clickLive clicks the first element matching css on a live page. The
// event feed may swap the fragment holding it between the lookup of the
// node and the click ("Could not find node with given id"): the click is
// tried again, for a moment, on whatever now matches css.
func clickLive(t *testing.T, ctx context.Context, name, css string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for try := 0; ; try++ {
		err := chromedp.Do(cctx, chromedp.Click(chromedp.CSS(css)))
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node") && !strings.Contains(err.Error(), "No node") || try == 20 {
			failWithPage(t, ctx, name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// step runs actions with their own deadline, and on failure shows the page.
func step(t *testing.T, ctx context.Context, name string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		failWithPage(t, ctx, name, err)
	}
}

// failWithPage ends the test, showing the page as it is, so a browser
// failure says more than "context deadline exceeded".
func failWithPage(t *testing.T, ctx context.Context, step string, err error) {
	t.Helper()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	html, herr := chromedp.Run(dctx, chromedp.OuterHTML(chromedp.CSS(`main`)))
	if herr != nil {
		html = "(page unavailable: " + herr.Error() + ")"
	}
	t.Fatalf("%s: %v\npage:\n%s", step, err, html)
}
