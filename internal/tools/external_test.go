package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func mustBuiltin(t *testing.T) *tools.Registry {
	t.Helper()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustTool(t *testing.T, r *tools.Registry, name string) *tools.Tool {
	t.Helper()
	tool, ok := r.Get(name)
	if !ok {
		t.Fatalf("%s is not declared", name)
	}
	return tool
}

// mustWorkspace creates a workspace with that webhook allowlist.
func mustWorkspace(t *testing.T, pool *pgxpool.Pool, slug string, allowlist ...string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	ws, err := db.New(pool).EnsureWorkspace(ctx, db.EnsureWorkspaceParams{Slug: slug, Name: slug})
	if err != nil {
		t.Fatal(err)
	}
	if allowlist == nil {
		allowlist = []string{}
	}
	if _, err := pool.Exec(ctx, "UPDATE workspaces SET webhook_allowlist = $2 WHERE id = $1", ws.ID, allowlist); err != nil {
		t.Fatal(err)
	}
	return ws.ID
}

// run executes the tool the way the proposals service does: arguments
// validated first, the executor inside a transaction that commits only when
// it succeeds.
func run(t *testing.T, pool *pgxpool.Pool, tool *tools.Tool, ws uuid.UUID, args string) (map[string]any, error) {
	t.Helper()
	if err := tool.ValidateArguments(json.RawMessage(args)); err != nil {
		t.Fatalf("%s arguments %s: %v", tool.Name, args, err)
	}
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	result, err := tool.Run(ctx, db.New(tx), ws, json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The result is stored as JSON: read it back as a caller would.
	b, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, nil
}

func mustOutbox(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID) []db.Outbox {
	t.Helper()
	rows, err := db.New(pool).ListOutbox(context.Background(), db.ListOutboxParams{WorkspaceID: ws, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func argMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// irreversibleDefault is the irreversible class's default rate limit (the
// four authority classes: about one a minute per agent, and a daily cap).
var irreversibleDefault = tools.RateLimits{PerAgentPerMinute: 1, PerWorkspacePerDay: 50}

func TestBuiltin_DeclaresNineToolsWithTheirContracts(t *testing.T) {
	r := mustBuiltin(t)
	var names []string
	for _, tool := range r.List() {
		names = append(names, tool.Name)
	}
	want := []string{"email.send", "notes.append", "payment.initiate", "records.bulk_delete", "records.delete",
		"records.get", "records.put", "records.search", "webhook.post"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	if g, ok := r.Classes().Group("webhook.post"); !ok || g != policy.GroupExternal {
		t.Errorf("webhook.post is in group %q (%v), want external", g, ok)
	}

	cases := []struct {
		name      string
		effect    policy.Effect
		authority policy.Authority
		risk      policy.Risk
		class     string   // static class
		classes   []string // computed classes
		gating    tools.Gating
		limits    tools.RateLimits
		dedup     time.Duration
	}{
		{"email.send", policy.EffectMutate, policy.AuthorityWriteNonIdempotent, policy.RiskHigh, "",
			[]string{"email.send.internal", "email.send.external"}, tools.Gating{ApproverRole: "approver"},
			tools.RateLimits{PerAgentPerMinute: 10, PerWorkspacePerHour: 100, PerWorkspacePerDay: 500}, 24 * time.Hour},
		{"webhook.post", policy.EffectMutate, policy.AuthorityWriteNonIdempotent, policy.RiskHigh, "webhook.post", nil,
			tools.Gating{ApproverRole: "approver"}, tools.RateLimits{PerAgentPerMinute: 30}, 24 * time.Hour},
		{"records.bulk_delete", policy.EffectDestructive, policy.AuthorityIrreversible, policy.RiskHigh, "tool.call.local", nil,
			tools.Gating{Threshold: "count(keys) > 10", ApproverRole: "approver"}, irreversibleDefault, 7 * 24 * time.Hour},
		{"payment.initiate", policy.EffectDestructive, policy.AuthorityIrreversible, policy.RiskHigh, "payment.initiate", nil,
			tools.Gating{Required: true, ApproverRole: "admin"}, irreversibleDefault, 7 * 24 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool := mustTool(t, r, c.name)
			k := tool.Contract
			if tool.Effect != c.effect || k.Authority != c.authority || k.Risk != c.risk {
				t.Errorf("effect %s, authority %s, risk %s; want %s, %s, %s", tool.Effect, k.Authority, k.Risk, c.effect, c.authority, c.risk)
			}
			if k.ActionClass != c.class || !slices.Equal(k.ActionClasses, c.classes) || (k.Classify != nil) != (c.classes != nil) {
				t.Errorf("class %q, classes %v, computed %v; want %q, %v", k.ActionClass, k.ActionClasses, k.Classify != nil, c.class, c.classes)
			}
			if !k.Idempotency.Required || k.Idempotency.Window != c.dedup {
				t.Errorf("idempotency %+v, want required for %s", k.Idempotency, c.dedup)
			}
			if k.Gating.Required != c.gating.Required || k.Gating.Threshold != c.gating.Threshold || k.Gating.ApproverRole != c.gating.ApproverRole {
				t.Errorf("gating %+v, want %+v", k.Gating, c.gating)
			}
			if k.RateLimits != c.limits {
				t.Errorf("rate limits %+v, want %+v", k.RateLimits, c.limits)
			}
			if k.Summarize == nil {
				t.Error("no summary for approvers")
			}
		})
	}
}

func TestEmailSend_ClassifiedByTheRecipientsDomain(t *testing.T) {
	r := mustBuiltin(t)
	tool := mustTool(t, r, "email.send")
	ws := tools.Workspace{InternalDomains: []string{"acme.com", "@Corp.Example."}}
	cases := []struct {
		name, to, want string
	}{
		{"internal domain", "ana@acme.com", "email.send.internal"},
		{"subdomain", "ana@eu.mail.acme.com", "email.send.internal"},
		{"upper-case address", "Ana@ACME.COM", "email.send.internal"},
		{"list entry with @ and trailing dot", "bo@corp.example", "email.send.internal"},
		{"mixed-case subdomain of a mixed-case entry", "bo@HQ.corp.EXAMPLE", "email.send.internal"},
		{"external", "ana@example.com", "email.send.external"},
		{"look-alike suffix", "ana@notacme.com", "email.send.external"},
		{"internal domain inside another", "ana@acme.com.evil.io", "email.send.external"},
		{"internal domain as local part", "acme.com@evil.io", "email.send.external"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tool.Class(map[string]any{"to": c.to}, ws, r.Classes()); got != c.want {
				t.Errorf("class of %s = %q, want %q", c.to, got, c.want)
			}
		})
	}
	t.Run("no internal domains", func(t *testing.T) {
		if got := tool.Class(map[string]any{"to": "ana@acme.com"}, tools.Workspace{}, r.Classes()); got != "email.send.external" {
			t.Errorf("class = %q, want external", got)
		}
	})
	if f := tool.Contract.Facts(map[string]any{"to": "ana@acme.com"}); !slices.Equal(f.Recipients, []string{"ana@acme.com"}) {
		t.Errorf("facts recipients %v", f.Recipients)
	}
}

func TestExternalTools_SchemasRefuseBadArguments(t *testing.T) {
	r := mustBuiltin(t)
	cases := []struct {
		tool, args string
		ok         bool
	}{
		{"email.send", `{"to": "ana@acme.com", "subject": "Hi", "body": "Hello"}`, true},
		{"email.send", `{"to": "ana", "subject": "Hi", "body": "Hello"}`, false},
		{"email.send", `{"to": "ana@acme", "subject": "Hi", "body": "Hello"}`, false},
		{"email.send", `{"to": "ana@acme.com", "subject": "", "body": "Hello"}`, false},
		{"email.send", `{"to": "ana@acme.com", "subject": "Hi", "body": "Hello", "cc": "x@y.z"}`, false},
		{"webhook.post", `{"url": "https://hooks.example.com/x", "payload": {"a": 1}}`, true},
		{"webhook.post", `{"url": "ftp://hooks.example.com/x", "payload": {}}`, false},
		{"webhook.post", `{"url": "https://hooks.example.com/x", "payload": [1]}`, false},
		{"records.bulk_delete", `{"collection": "c", "keys": ["a", "b"]}`, true},
		{"records.bulk_delete", `{"collection": "c", "keys": []}`, false},
		{"records.bulk_delete", `{"collection": "c", "keys": ["a", "a"]}`, false},
		{"records.bulk_delete", `{"collection": "c", "keys": [""]}`, false},
		{"records.bulk_delete", `{"collection": "c", "keys": ` + keysJSON(1001) + `}`, false},
		{"payment.initiate", `{"amount": 1250.5, "currency": "EUR", "payee": "Acme Ltd"}`, true},
		{"payment.initiate", `{"amount": 0.07, "currency": "EUR", "payee": "Acme Ltd"}`, true},
		{"payment.initiate", `{"amount": 0, "currency": "EUR", "payee": "Acme Ltd"}`, false},
		{"payment.initiate", `{"amount": 10.005, "currency": "EUR", "payee": "Acme Ltd"}`, false},
		{"payment.initiate", `{"amount": 1e10, "currency": "EUR", "payee": "Acme Ltd"}`, false},
		{"payment.initiate", `{"amount": 10, "currency": "eur", "payee": "Acme Ltd"}`, false},
	}
	for _, c := range cases {
		t.Run(c.tool+" "+c.args[:min(len(c.args), 60)], func(t *testing.T) {
			err := mustTool(t, r, c.tool).ValidateArguments(json.RawMessage(c.args))
			if (err == nil) != c.ok {
				t.Errorf("valid = %v, want %v (%v)", err == nil, c.ok, err)
			}
		})
	}
}

// keysJSON is a JSON array of n distinct keys.
func keysJSON(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	b, _ := json.Marshal(keys)
	return string(b)
}

func TestEmailSend_WritesTheMailToTheOutbox(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "mail")
	other := mustWorkspace(t, pool, "other")
	tool := mustTool(t, mustBuiltin(t), "email.send")

	res, err := run(t, pool, tool, ws, `{"to": "ana@example.com", "subject": "Renewal reminder", "body": "Your plan renews on 1 May."}`)
	if err != nil {
		t.Fatal(err)
	}
	rows := mustOutbox(t, pool, ws)
	if len(rows) != 1 {
		t.Fatalf("%d outbox rows, want 1", len(rows))
	}
	o := rows[0]
	if o.Kind != "email" || o.Recipient != "ana@example.com" || o.Subject.String != "Renewal reminder" || !o.Subject.Valid ||
		o.Body != "Your plan renews on 1 May." || o.ResponseStatus.Valid {
		t.Errorf("outbox row %+v", o)
	}
	if res["delivered_to"] != "outbox" || res["to"] != "ana@example.com" || res["outbox_id"] != float64(o.ID) {
		t.Errorf("result %v, outbox id %d", res, o.ID)
	}
	if n := len(mustOutbox(t, pool, other)); n != 0 {
		t.Errorf("another workspace's outbox has %d rows", n)
	}
}

func TestWebhookPost_PostsTheExactPayloadAndRecordsTheStatus(t *testing.T) {
	t.Parallel()
	var gotBody, gotType, gotMethod atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		gotType.Store(r.Header.Get("Content-Type"))
		gotMethod.Store(r.Method)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "hooks", "127.0.0.1")
	tool := mustTool(t, mustBuiltin(t), "webhook.post")

	payload := `{"event":"renewal","n":3,"nested":{"ok":true,"list":[1,"two",null]}}`
	res, err := run(t, pool, tool, ws, `{"url": "`+srv.URL+`/hook?x=1", "payload": `+payload+`}`)
	if err != nil {
		t.Fatal(err)
	}
	if gotMethod.Load() != "POST" || gotType.Load() != "application/json" || gotBody.Load() != payload {
		t.Errorf("server got %v %v %v, want POST application/json %s", gotMethod.Load(), gotType.Load(), gotBody.Load(), payload)
	}
	rows := mustOutbox(t, pool, ws)
	if len(rows) != 1 {
		t.Fatalf("%d outbox rows, want 1", len(rows))
	}
	o := rows[0]
	if o.Kind != "webhook" || o.Recipient != srv.URL+"/hook?x=1" || o.Body != payload || o.ResponseStatus.Int32 != 202 || o.Subject.Valid {
		t.Errorf("outbox row %+v", o)
	}
	if res["status"] != float64(202) || res["outbox_id"] != float64(o.ID) {
		t.Errorf("result %v", res)
	}
}

func TestWebhookPost_FailsOnAnythingButSuccess(t *testing.T) {
	t.Parallel()
	var redirected atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// A port nothing listens on: the server is closed at once.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "hooks", "127.0.0.1")
	tool := mustTool(t, mustBuiltin(t), "webhook.post")
	cases := []struct {
		name, url, want string
	}{
		{"server error", srv.URL + "/fail", "answered 500 Internal Server Error"},
		{"redirect not followed", srv.URL + "/moved", "answered 307 Temporary Redirect"},
		{"nobody listening", closed.URL + "/hook", "was not delivered: the connection failed"},
	}
	for _, c := range cases {
		_, err := run(t, pool, tool, ws, `{"url": "`+c.url+`", "payload": {"a": 1}}`)
		var ae *apperr.Error
		if !errors.As(err, &ae) || !strings.Contains(ae.Message, c.want) {
			t.Errorf("%s: error %v, want an *apperr.Error saying %q", c.name, err, c.want)
		}
	}
	if n := redirected.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	if n := len(mustOutbox(t, pool, ws)); n != 0 {
		t.Errorf("%d outbox rows after failed deliveries, want 0", n)
	}
}

// The executor checks the workspace's allowlist itself, so nothing reaches
// a host off it even if a caller skipped the constraint check.
func TestWebhookPost_ExecutorRefusesAHostOffTheAllowlist(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	pool := dbtest.MustPool(t)
	tool := mustTool(t, mustBuiltin(t), "webhook.post")
	for _, allow := range [][]string{nil, {"hooks.example.com"}} {
		ws := mustWorkspace(t, pool, "ws-"+strconv.Itoa(len(allow)), allow...)
		_, err := run(t, pool, tool, ws, `{"url": "`+srv.URL+`", "payload": {}}`)
		if apperr.Code(err) != apperr.EFORBIDDEN || !strings.Contains(apperr.Message(err), "is not on the allowlist") {
			t.Errorf("allowlist %v: error %v, want forbidden, not on the allowlist", allow, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server was hit %d times", n)
	}
}

func TestWebhookPost_ConstraintsFollowTheWorkspaceAllowlist(t *testing.T) {
	tool := mustTool(t, mustBuiltin(t), "webhook.post")
	facts := func(url string) policy.Facts {
		return tool.Contract.Facts(map[string]any{"url": url, "payload": map[string]any{}})
	}
	t.Run("empty allowlist refuses every host", func(t *testing.T) {
		for _, ws := range []tools.Workspace{{}, {WebhookAllowlist: []string{" ", "@."}}} {
			cs := tool.ConstraintsFor(ws)
			if len(cs) != 1 || cs[0].Kind != policy.ConstraintDomainAllowlist || cs[0].Validate() != nil {
				t.Fatalf("constraints %+v", cs)
			}
			for _, url := range []string{"https://hooks.example.com/x", "http://127.0.0.1:8080/", "https://localhost/"} {
				err := policy.Check(cs, facts(url))
				var v *policy.Violation
				if !errors.As(err, &v) || !strings.Contains(v.Reason, "is not on the allowlist") {
					t.Errorf("%s: %v, want not on the allowlist", url, err)
				}
			}
		}
	})
	t.Run("allowlist admits its hosts and their subdomains only", func(t *testing.T) {
		cs := tool.ConstraintsFor(tools.Workspace{WebhookAllowlist: []string{"hooks.example.com", "Partner.IO"}})
		if len(cs) != 1 || !slices.Equal(cs[0].Values, []string{"hooks.example.com", "Partner.IO"}) {
			t.Fatalf("constraints %+v", cs)
		}
		for url, ok := range map[string]bool{
			"https://hooks.example.com/x":       true,
			"https://eu.partner.io:8443/y?z=1":  true,
			"https://example.com/":              false,
			"https://hooks.example.com.evil/":   false,
			"http://evil.io/?hooks.example.com": false,
		} {
			err := policy.Check(cs, facts(url))
			if (err == nil) != ok {
				t.Errorf("%s: %v, want allowed %v", url, err, ok)
			}
		}
	})
}

func TestRecordsBulkDelete_GatedAboveTenKeys(t *testing.T) {
	tool := mustTool(t, mustBuiltin(t), "records.bulk_delete")
	for n, want := range map[int]bool{1: false, 10: false, 11: true, 1000: true} {
		args := argMap(t, `{"collection": "c", "keys": `+keysJSON(n)+`}`)
		if got := tool.ThresholdExceeded(args); got != want {
			t.Errorf("%d keys: threshold exceeded %v, want %v", n, got, want)
		}
	}
}

func TestRecordsBulkDelete_DeletesOnlyTheListedKeysOfThisWorkspace(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	ctx := context.Background()
	ws := mustWorkspace(t, pool, "mine")
	other := mustWorkspace(t, pool, "theirs")
	q := db.New(pool)
	put := func(ws uuid.UUID, collection, key string) {
		if _, err := q.PutRecord(ctx, db.PutRecordParams{WorkspaceID: ws, Collection: collection, Key: key, Value: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c", "keep"} {
		put(ws, "clients", k)
		put(other, "clients", k)
	}
	put(ws, "archive", "a")
	tool := mustTool(t, mustBuiltin(t), "records.bulk_delete")

	res, err := run(t, pool, tool, ws, `{"collection": "clients", "keys": ["c", "zz", "a", "b", "gone"]}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if want := `{"collection":"clients","deleted":3,"keys":["c","a","b"],"missing":["zz","gone"]}`; string(b) != want {
		t.Errorf("result %s, want %s", b, want)
	}
	left := func(ws uuid.UUID, collection string) []string {
		rows, err := q.SearchRecords(ctx, db.SearchRecordsParams{WorkspaceID: ws, Query: ""})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range rows {
			if r.Collection == collection {
				keys = append(keys, r.Key)
			}
		}
		return keys
	}
	if got := left(ws, "clients"); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("this workspace keeps %v, want [keep]", got)
	}
	if got := left(ws, "archive"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("another collection keeps %v, want [a]", got)
	}
	if got := left(other, "clients"); !slices.Equal(got, []string{"a", "b", "c", "keep"}) {
		t.Errorf("another workspace keeps %v, want all four", got)
	}

	res, err = run(t, pool, tool, ws, `{"collection": "clients", "keys": ["a"]}`)
	if err != nil || res["deleted"] != float64(0) || len(res["missing"].([]any)) != 1 {
		t.Errorf("deleting again: %v, %v; want nothing deleted, a missing", res, err)
	}
}

func TestPaymentInitiate_RecordsAPerformedPaymentRequest(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "pay")
	tool := mustTool(t, mustBuiltin(t), "payment.initiate")

	res, err := run(t, pool, tool, ws, `{"amount": 1250.35, "currency": "EUR", "payee": "Acme Ltd"}`)
	if err != nil {
		t.Fatal(err)
	}
	if res["status"] != "performed" || res["amount"] != 1250.35 || res["currency"] != "EUR" || res["payee"] != "Acme Ltd" {
		t.Errorf("result %v", res)
	}
	var (
		amount, currency, payee, status string
		performed                       bool
	)
	err = pool.QueryRow(context.Background(),
		"SELECT amount::text, currency, payee, status, performed_at IS NOT NULL FROM payment_requests WHERE id = $1 AND workspace_id = $2",
		res["payment_request_id"], ws).Scan(&amount, &currency, &payee, &status, &performed)
	if err != nil {
		t.Fatal(err)
	}
	if amount != "1250.35" || currency != "EUR" || payee != "Acme Ltd" || status != "performed" || !performed {
		t.Errorf("row %s %s %s %s performed %v", amount, currency, payee, status, performed)
	}

	// The amount is a fact for max_amount constraints.
	f := tool.Contract.Facts(argMap(t, `{"amount": 1250.35, "currency": "EUR", "payee": "Acme Ltd"}`))
	if f.Amount == nil || *f.Amount != 1250.35 {
		t.Errorf("facts amount %v", f.Amount)
	}
	if policy.Check([]policy.Constraint{{Kind: policy.ConstraintMaxAmount, Amount: 1000}}, f) == nil {
		t.Error("max_amount 1000 allowed 1250.35")
	}
	// The class is human-only: no agent call ever runs it.
	r := mustBuiltin(t)
	if g, _ := r.Classes().Group(tool.Class(nil, tools.Workspace{}, r.Classes())); g != policy.GroupHumanOnly {
		t.Errorf("payment.initiate is in group %q, want human_only", g)
	}
}
