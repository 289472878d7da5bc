package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/testsmtp"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// publicURL is the test servers' public URL: the links in their
// notifications start with it (the test maps it to the server's address).
const publicURL = "http://gatehouse.test"

// notifyEnv is a server that mails through a test SMTP server and sends
// due notifications every 50 ms.
func notifyEnv(t *testing.T) (*env, *testsmtp.Server) {
	t.Helper()
	mail := testsmtp.New(t)
	e := newEnvConfig(t, dbtest.MustPool(t), sendRegistry(t), web.Config{CookieSecure: true, PublicURL: publicURL,
		Mailer: tools.SMTPMailer{Addr: mail.Addr, From: "gatehouse@example.com"}, NotifyEvery: 50 * time.Millisecond})
	return e, mail
}

// hook is a webhook receiver: every delivery's body and headers.
type hook struct {
	url  string
	mu   sync.Mutex
	got  []delivery
	fail int // answer 500 to this many first
}

type delivery struct {
	body   []byte
	header http.Header
}

func newHook(t *testing.T) *hook {
	t.Helper()
	h := &hook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fail > 0 {
			h.fail--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		h.got = append(h.got, delivery{body: body, header: r.Header.Clone()})
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

func (h *hook) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...)
}

var (
	linkInMail   = regexp.MustCompile(regexp.QuoteMeta(publicURL) + `(/l/[A-Za-z0-9_-]+)`)
	secretOnPage = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)
)

// mailTo waits for a message to addr and returns its data.
func mailTo(t *testing.T, mail *testsmtp.Server, addr string, n int) string {
	t.Helper()
	var found []string
	waitFor(t, "mail to "+addr, func() bool {
		found = nil
		for _, m := range mail.Messages() {
			if len(m.To) == 1 && m.To[0] == "<"+addr+">" {
				found = append(found, m.Data)
			}
		}
		return len(found) >= n
	})
	return found[n-1]
}

// A packet reaches the people who may approve it where they are: by mail
// (through SMTP) and by their webhook, signed as Standard Webhooks sign
// (verified with the reference library), with a one-time link and never
// the call's arguments; not its proposer or owner. A webhook that fails is
// tried again.
func TestNotify_APacketReachesItsApproversByMailAndSignedWebhook(t *testing.T) {
	t.Parallel()
	e, mail := notifyEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	boss := e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	if _, err := e.pool.Exec(t.Context(), `UPDATE workspaces SET webhook_allowlist = '{127.0.0.1}'`); err != nil {
		t.Fatal(err)
	}
	h := newHook(t)
	h.fail = 1
	boss.get("/settings/notifications")
	if resp, body := boss.postForm("/settings/notifications", url.Values{"email": {"1"}, "webhook_url": {h.url}, "time_zone": {"UTC"}, "digest_minutes": {"0"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save settings: %d %s", resp.StatusCode, body)
	}
	_, page := boss.get("/settings/notifications")
	secret := secretOnPage.FindString(page)
	if secret == "" {
		t.Fatal("the settings page does not show the webhook's secret")
	}

	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Renewals"})
	resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "secret-customer@example.org"}, "rationale": "the client asked for the renewal", "idempotency_key": "notify-send-00000001"})
	if resp.StatusCode != http.StatusAccepted || p["approval_id"] == nil {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	approval := p["approval_id"].(string)

	data := mailTo(t, mail, "boss@example.com", 1)
	for _, want := range []string{"Subject: ", "waits for an approver", "Send to secret-customer@example.org", "The agent's rationale: the client asked for the renewal", publicURL + "/l/", publicURL + "/admin/approvals/" + approval} {
		if !strings.Contains(data, want) {
			t.Errorf("the mail lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(data, `"to"`) {
		t.Errorf("the mail carries the call's arguments:\n%s", data)
	}
	for _, m := range mail.Messages() {
		if m.To[0] == "<owner@example.com>" {
			t.Errorf("the owner, who proposed the call, was told to approve it")
		}
	}

	// The first delivery fails (500): it is queued again after its backoff,
	// which the test cuts short.
	waitFor(t, "the webhook's first attempt to fail", func() bool {
		var status, last string
		e.pool.QueryRow(t.Context(), `SELECT status, coalesce(last_error, '') FROM notifications WHERE channel = 'webhook'`).Scan(&status, &last)
		return status == "queued" && strings.Contains(last, "answered 500")
	})
	e.pool.Exec(t.Context(), `UPDATE notifications SET next_attempt_at = now() WHERE channel = 'webhook'`)
	waitFor(t, "the webhook's delivery (after one failure)", func() bool { return len(h.deliveries()) == 1 })
	d := h.deliveries()[0]
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(d.body, d.header); err != nil {
		t.Fatalf("the signature does not verify: %v (%v)", err, d.header)
	}
	var payload struct {
		Type string `json:"type"`
		Data struct {
			Calls []struct {
				Kind, ApprovalID, Tool, DecideURL string
			} `json:"calls"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.body, &payload); err != nil {
		t.Fatal(err)
	}
	var calls []map[string]any
	json.Unmarshal(mustField(t, d.body, "data", "calls"), &calls)
	if payload.Type != "gatehouse.decision.requested" || len(calls) != 1 || calls[0]["approval_id"] != approval || calls[0]["kind"] != "packet" ||
		!strings.HasPrefix(calls[0]["decide_url"].(string), publicURL+"/l/") {
		t.Fatalf("payload: %s", d.body)
	}
	if wh.Verify(append([]byte(nil), append(d.body[:len(d.body)-1], ' ', '}')...), d.header) == nil {
		t.Error("an altered body verifies")
	}
	var attempts int
	if err := e.pool.QueryRow(t.Context(), `SELECT attempts FROM notifications WHERE channel = 'webhook'`).Scan(&attempts); err != nil || attempts != 2 {
		t.Errorf("the webhook was sent %d times (%v), want 2 (one failure, one success)", attempts, err)
	}
}

// mustField is the raw JSON at a path of a document.
func mustField(t *testing.T, doc []byte, path ...string) json.RawMessage {
	t.Helper()
	raw := json.RawMessage(doc)
	for _, k := range path {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		raw = m[k]
	}
	return raw
}

// A notification's link opens a page for its recipient that shows exactly
// what would run and decides the call once; it never acts on GET. An
// altered link, one opened by someone else, one used, expired or whose call
// was decided meanwhile does nothing and says why. Someone signed out signs
// in and lands back on it.
func TestNotify_ALinkDecidesOnceForItsRecipientOnly(t *testing.T) {
	t.Parallel()
	e, mail := notifyEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	boss := e.user("boss@example.com", auth.RoleApprover)
	other := e.user("other@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Renewals"})
	send := func(to, key string) string {
		resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
			"arguments": map[string]any{"to": to}, "rationale": "the client asked for the renewal", "idempotency_key": key})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("propose: %d %v", resp.StatusCode, p)
		}
		return p["approval_id"].(string)
	}
	approval := send("ana@example.org", "notify-link-00000001")
	link := linkInMail.FindStringSubmatch(mailTo(t, mail, "boss@example.com", 1))[1]
	status := func() string {
		var s string
		e.pool.QueryRow(t.Context(), `SELECT status FROM approvals WHERE id = $1`, approval).Scan(&s)
		return s
	}

	// Signed out: sign in, then back to the link.
	if resp, _ := e.client().get(link); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "/signin?next="+url.QueryEscape(link)) {
		t.Fatalf("signed out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Someone else, and an altered link: nothing shown, nothing decided.
	if resp, body := other.get(link); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "sent to someone else") || strings.Contains(body, "ana@example.org") {
		t.Fatalf("another approver: %d", resp.StatusCode)
	}
	altered := link[:len(link)-3] + "AAA"
	if resp, body := boss.get(altered); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "altered") {
		t.Fatalf("an altered link: %d", resp.StatusCode)
	}
	// The recipient sees exactly what would run; GET decides nothing.
	resp, body := boss.get(link)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "t.send") || !strings.Contains(body, "ana@example.org") || status() != "pending" {
		t.Fatalf("the link's page: %d %s (packet %s)", resp.StatusCode, body, status())
	}
	if resp, body := boss.postForm(link, url.Values{"action": {"approve"}}); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Approved") || status() != "approved" {
		t.Fatalf("approve by link: %d (packet %s) %s", resp.StatusCode, status(), body)
	}
	if resp, body := boss.postForm(link, url.Values{"action": {"approve"}}); resp.StatusCode != http.StatusGone || !strings.Contains(body, "used already") {
		t.Fatalf("the link again: %d", resp.StatusCode)
	}
	var used int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE action = 'link.used' AND data->>'approval_id' = $1`, approval).Scan(&used); err != nil || used != 1 {
		t.Errorf("%d link.used audit rows (%v), want 1", used, err)
	}

	// Expired, and decided meanwhile (rejected from the inbox).
	second := send("bo@example.org", "notify-link-00000002")
	link2 := linkInMail.FindStringSubmatch(mailTo(t, mail, "boss@example.com", 2))[1]
	third := send("cy@example.org", "notify-link-00000003")
	link3 := linkInMail.FindStringSubmatch(mailTo(t, mail, "boss@example.com", 3))[1]
	if _, err := e.pool.Exec(t.Context(), `UPDATE action_links SET expires_at = now() - interval '1 second', created_at = now() - interval '1 hour' WHERE approval_id = $1`, second); err != nil {
		t.Fatal(err)
	}
	if resp, body := boss.postForm(link2, url.Values{"action": {"approve"}}); resp.StatusCode != http.StatusGone || !strings.Contains(body, "expired") {
		t.Fatalf("an expired link: %d", resp.StatusCode)
	}
	boss.get("/admin/approvals")
	if resp, _ := boss.postForm("/admin/approvals/"+third+"/reject", url.Values{"reason": {"not now"}}); resp.StatusCode >= 400 {
		t.Fatalf("reject in the inbox: %d", resp.StatusCode)
	}
	if resp, body := boss.get(link3); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "decided already") {
		t.Fatalf("a link whose call was decided: %d", resp.StatusCode)
	}
}

// A card in a conversation reaches its owner; settings that cannot be read
// are refused field by field and change nothing; quiet hours hold mail
// back.
func TestNotify_CardsPreferencesAndQuietHours(t *testing.T) {
	t.Parallel()
	e, mail := notifyEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Notes"})
	put := func(key string) {
		resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": "crm", "key": key, "value": map[string]any{"a": 1}}, "rationale": "record what the client said"})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("propose: %d %v", resp.StatusCode, p)
		}
	}
	put("one")
	if data := mailTo(t, mail, "owner@example.com", 1); !strings.Contains(data, "waits for you to confirm") || !linkInMail.MatchString(data) {
		t.Fatalf("the card's mail:\n%s", data)
	}

	owner.get("/settings/notifications")
	for form, field := range map[string]url.Values{
		"webhook_url":    {"email": {"1"}, "webhook_url": {"https://evil.example/hook"}},
		"time_zone":      {"email": {"1"}, "time_zone": {"Mars/Olympus"}},
		"quiet_start":    {"email": {"1"}, "quiet_start": {"25:00"}, "quiet_end": {"07:00"}},
		"digest_minutes": {"email": {"1"}, "digest_minutes": {"99999"}},
	} {
		resp, body := owner.postForm("/settings/notifications", field)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="`+form+`-error"`) {
			t.Errorf("%s: %d", form, resp.StatusCode)
		}
	}
	var rows int
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM notification_preferences`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("refused settings stored %d rows", rows)
	}

	// Quiet all day but a minute: the next card's mail waits.
	now := time.Now().UTC()
	start, end := now.Add(-time.Hour), now.Add(2*time.Hour)
	if now.Hour() >= 21 || now.Hour() < 2 {
		t.Skip("too close to midnight UTC for a quiet window that does not wrap")
	}
	if resp, body := owner.postForm("/settings/notifications", url.Values{"email": {"1"}, "time_zone": {"UTC"},
		"quiet_start": {start.Format("15:04")}, "quiet_end": {end.Format("15:04")}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save quiet hours: %d %s", resp.StatusCode, body)
	}
	put("two")
	waitFor(t, "the second card's notification to be deferred", func() bool {
		var next time.Time
		err := e.pool.QueryRow(t.Context(), `SELECT next_attempt_at FROM notifications n JOIN proposals p ON p.id = n.proposal_id
			WHERE p.arguments->>'key' = 'two' AND n.status = 'queued'`).Scan(&next)
		return err == nil && next.After(now.Add(time.Hour))
	})
	if n := len(mail.Messages()); n != 1 {
		t.Fatalf("%d mails, want only the first one (the second waits for the end of the quiet hours)", n)
	}
}
