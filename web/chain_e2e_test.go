package web_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// Five hundred outcomes at once in one workspace, through two server
// instances on one database (each running its sequencer): every outcome
// has exactly one receipt, and the chain is gapless and verifies.
func TestReceipts_FiveHundredConcurrentOutcomesOnTwoInstancesMakeOneChain(t *testing.T) {
	t.Parallel()
	registry := liftedRegistry(t) // 500 records.put from one token in a few seconds
	a := newEnvWith(t, dbtest.MustPool(t), registry)
	b := newEnvWith(t, a.pool, registry)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	user := a.token("owner@example.com", auth.TokenUser)
	_, conv := a.api("POST", "/api/v1/conversations", user, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	a.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})

	const n, workers = 500, 32
	var wg sync.WaitGroup
	jobs := make(chan int)
	failed := make(chan string, n)
	for w := range workers {
		e := a
		if w%2 == 1 {
			e = b
		}
		wg.Go(func() {
			for i := range jobs {
				body := []byte(fmt.Sprintf(`{"tool":"records.put","arguments":{"collection":"c","key":"k%d","value":{}},"rationale":"record number %d"}`, i, i))
				if status, _, resp := rawPost(t, e.url+base+"/tool-calls", agent, "", body); status != http.StatusOK {
					failed <- fmt.Sprintf("%d %s", status, resp)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(failed)
	for f := range failed {
		t.Fatalf("a call failed: %s", f)
	}
	var calls, receipted, unchained int
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.pool.QueryRow(t.Context(), "SELECT count(*) FROM receipt_rows WHERE seq IS NULL").Scan(&unchained)
		if unchained == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if unchained != 0 {
		t.Fatalf("%d receipts still unchained", unchained)
	}
	a.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals WHERE tool = 'records.put'").Scan(&calls)
	a.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals p WHERE tool = 'records.put'
		AND (SELECT count(*) FROM receipts r WHERE r.proposal_id = p.id AND r.kind = 'execution') = 1`).Scan(&receipted)
	if calls != n || receipted != n {
		t.Fatalf("%d calls, %d with exactly one execution receipt; want %d", calls, receipted, n)
	}
	var total, maxSeq int
	a.pool.QueryRow(t.Context(), "SELECT count(*), coalesce(max(seq), 0) FROM receipt_rows").Scan(&total, &maxSeq)
	if total != maxSeq {
		t.Fatalf("%d receipts but the head is seq %d: a gap", total, maxSeq)
	}
	if v := a.verifyChain(user); v["ok"] != true || v["checked"] != float64(total) {
		t.Fatalf("verify: %v", v)
	}
}
