package web_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// A hundred calls of a tool the agent runs itself, at once, through two
// server instances on one database: each proposed on one instance and
// reported on the other (the ticket holds on any instance), and a second
// report of each refused. Exactly a hundred calls applied, each with
// exactly one execution receipt, and the workspace's chain gapless.
func TestCallerTools_AHundredConcurrentCallsOnTwoInstancesLeaveAHundredReceipts(t *testing.T) {
	t.Parallel()
	// The class default (60 a minute per agent) is not this test's
	// subject: the file raises it, as an operator of such an agent would.
	policy := callerPolicy + "    rate_limits: {per_agent_per_minute: 1000}\n"
	a, _ := newEnvPolicy(t, policy)
	b, _ := newEnvPolicyOn(t, a.pool, policy)
	a.user("owner@example.com", auth.RoleMember)
	agent, user := a.token("owner@example.com", auth.TokenAgent), a.token("owner@example.com", auth.TokenUser)
	_, conv := a.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Invoices"})
	base := "/api/v1/conversations/" + conv["id"].(string)
	if resp, p := a.api("PATCH", base, user, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("mode: %d %v", resp.StatusCode, p)
	}

	const n = 100
	var wg sync.WaitGroup
	failures := make(chan string, 3*n)
	for i := range n {
		propose, report := a, b
		if i%2 == 1 {
			propose, report = b, a
		}
		wg.Go(func() {
			resp, p := propose.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "app.send_invoice",
				"arguments": map[string]any{"invoice": fmt.Sprintf("INV-%03d", i), "amount": 120}, "rationale": "the customer asked for this invoice"})
			ticket, _ := p["execution_ticket"].(string)
			if resp.StatusCode != http.StatusAccepted || ticket == "" {
				failures <- fmt.Sprintf("propose %d: %d %v", i, resp.StatusCode, p)
				return
			}
			id := p["proposal_id"].(string)
			body := map[string]any{"ticket": ticket, "status": "succeeded", "result": map[string]any{"sent": i}}
			if resp, p := report.api("POST", "/api/v1/proposals/"+id+"/outcome", agent, body); resp.StatusCode != http.StatusOK || p["status"] != "applied" {
				failures <- fmt.Sprintf("report %d: %d %v", i, resp.StatusCode, p)
				return
			}
			if resp, p := propose.api("POST", "/api/v1/proposals/"+id+"/outcome", agent, body); resp.StatusCode < 400 || resp.StatusCode >= 500 {
				failures <- fmt.Sprintf("second report %d: %d %v", i, resp.StatusCode, p)
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	var applied, receipts, dupes int
	a.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals WHERE tool = 'app.send_invoice' AND status = 'applied'`).Scan(&applied)
	a.pool.QueryRow(t.Context(), `SELECT count(*) FROM receipts r JOIN proposals p ON p.id = r.proposal_id
		WHERE p.tool = 'app.send_invoice' AND r.kind = 'execution'`).Scan(&receipts)
	a.pool.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT proposal_id FROM receipts WHERE kind = 'execution' AND proposal_id IS NOT NULL
		GROUP BY proposal_id HAVING count(*) > 1) d`).Scan(&dupes)
	if applied != n || receipts != n || dupes != 0 {
		t.Fatalf("%d calls applied, %d execution receipts, %d calls with more than one; want %d, %d, 0", applied, receipts, dupes, n, n)
	}
	var unchained, total, maxSeq int
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.pool.QueryRow(t.Context(), "SELECT count(*) FROM receipt_rows WHERE seq IS NULL").Scan(&unchained)
		if unchained == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.pool.QueryRow(t.Context(), "SELECT count(*), coalesce(max(seq), 0) FROM receipt_rows").Scan(&total, &maxSeq)
	if unchained != 0 || total != maxSeq {
		t.Fatalf("%d receipts unchained; %d receipts, head at seq %d", unchained, total, maxSeq)
	}
	if v := a.verifyChain(user); v["ok"] != true || v["checked"] != float64(total) {
		t.Fatalf("verify: %v", v)
	}
}
