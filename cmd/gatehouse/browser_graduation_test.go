//go:build e2e

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// A person sees that a class has earned trust and raises the mode with the
// hint's one click.
func TestBrowser_AGraduationHintRaisesTheMode(t *testing.T) {
	url := dbtest.MustURL(t)
	s := startServer(t, map[string]string{
		"DATABASE_URL":             url,
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	conv := postJSON(t, s.URL+"/api/v1/conversations", agent, map[string]any{"title": "Notes"})
	postJSON(t, s.URL+"/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "notes", "key": "a", "value": map[string]any{}}, "rationale": "store the user's note"})
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Thirty approvals of the class, as the owner's Apply records them.
	if _, err := pool.Exec(context.Background(), `INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight)
		SELECT id, 'tool.call.local', 'approved', 'receipt', 0.85, 1, 0.85 FROM workspaces, generate_series(1, 30)`); err != nil {
		t.Fatal(err)
	}

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")
	step(t, ctx, "the hint raises the mode",
		chromedp.Navigate(s.URL+"/conversations/"+conv["id"].(string)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=graduation-hint][data-class="tool.call.local"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=graduation-raise]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@data-testid="mode-current"][text()="auto"]`)),
	)
	var mode string
	pool.QueryRow(context.Background(), "SELECT permission_mode FROM conversations WHERE id = $1", conv["id"]).Scan(&mode)
	if mode != "auto" {
		t.Fatalf("the mode is %s", mode)
	}
}
