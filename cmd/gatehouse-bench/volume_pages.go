package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// How each page is timed: sequential GETs, the median of them. A page
// that is slow at volume gets fewer samples (at least minSamples, unless
// one times out): the phase must end even where a page takes seconds.
const (
	pageSamples    = 20
	minPageSamples = 3
	pageBudget     = 20 * time.Second // per page and state, once minPageSamples are in
	pageTimeout    = 60 * time.Second
)

// viewer is who reads a page.
type viewer uint8

const (
	asOwner      viewer = iota // the owner's browser session
	asAdmin                    // the admin's browser session
	asOwnerToken               // the owner's user token (REST)
	asAdminToken               // the admin's user token
)

// pageSpec is one page or list API the phase times.
type pageSpec struct {
	Name  string
	Route string // as web/routes.go has it
	who   viewer
	path  func(pageContext) string
}

// pageContext is what the pages' URLs need: the seeded conversations and
// the state of the database.
type pageContext struct {
	hot, small uuid.UUID
	hotFeed    string    // the request the hot conversation's page makes when told it changed
	object     uuid.UUID // a call whose history the audit page looks up
	ownerEmail string
	now        time.Time
}

// volumePages are the pages a person or a caller hits, each read through
// what they read at volume: the header's counts are on every page (home
// has them and what needs the user); the audit page's filters each take
// another path through the log.
var volumePages = []pageSpec{
	{"home (header counts, what needs me)", "GET /", asOwner, func(pageContext) string { return "/" }},
	{"conversations", "GET /conversations", asOwner, func(pageContext) string { return "/conversations" }},
	{"hot conversation", "GET /conversations/:id", asOwner, func(c pageContext) string { return "/conversations/" + c.hot.String() }},
	{"small conversation", "GET /conversations/:id", asOwner, func(c pageContext) string { return "/conversations/" + c.small.String() }},
	{"hot conversation, live fragment", "GET /conversations/:id/transcript", asOwner, func(c pageContext) string { return c.hotFeed }},
	{"notebooks", "GET /notebooks", asOwner, func(pageContext) string { return "/notebooks" }},
	{"trust", "GET /trust", asOwner, func(pageContext) string { return "/trust" }},
	{"audit log (member)", "GET /audit", asOwner, func(pageContext) string { return "/audit" }},
	{"audit log (admin)", "GET /audit", asAdmin, func(pageContext) string { return "/audit" }},
	{"audit log, one call's history", "GET /audit?object=", asAdmin, func(c pageContext) string { return "/audit?object=" + c.object.String() }},
	{"audit log, by actor", "GET /audit?actor=", asAdmin, func(c pageContext) string { return "/audit?actor=" + url.QueryEscape(c.ownerEmail) }},
	{"audit log, by action", "GET /audit?action=", asAdmin, func(pageContext) string { return "/audit?action=proposal.refused" }},
	{"audit log, a month three months ago", "GET /audit?from=&to=", asAdmin, func(c pageContext) string {
		return "/audit?from=" + c.now.AddDate(0, -4, 0).Format(time.DateOnly) + "&to=" + c.now.AddDate(0, -3, 0).Format(time.DateOnly)
	}},
	{"approvals inbox", "GET /admin/approvals", asAdmin, func(pageContext) string { return "/admin/approvals" }},
	{"intent", "GET /admin/intent", asAdmin, func(pageContext) string { return "/admin/intent" }},
	{"receipts", "GET /admin/receipts", asAdmin, func(pageContext) string { return "/admin/receipts" }},
	{"feedback", "GET /admin/feedback", asAdmin, func(pageContext) string { return "/admin/feedback" }},
	{"API: conversations", "GET /api/v1/conversations", asOwnerToken, func(pageContext) string { return "/api/v1/conversations" }},
	{"API: hot conversation's messages", "GET /api/v1/conversations/:id/messages", asOwnerToken, func(c pageContext) string {
		return "/api/v1/conversations/" + c.hot.String() + "/messages"
	}},
	{"API: approvals", "GET /admin/approvals (token)", asAdminToken, func(pageContext) string { return "/admin/approvals" }},
	{"API: notebooks", "GET /api/v1/notebooks", asOwnerToken, func(pageContext) string { return "/api/v1/notebooks" }},
}

// hotPage is the page whose size has a target of its own.
const hotPage = "hot conversation"

// pageTiming is one page timed in one state of the database.
type pageTiming struct {
	Samples  []time.Duration
	Median   time.Duration
	Bytes    int    // the last answer's body
	Status   int    // the first answer that was not 200; 0: all were
	TimedOut bool   // a request took longer than pageTimeout
	Err      string // a request that failed otherwise
}

// ok says whether every request got a 200 in time.
func (t pageTiming) ok() bool {
	return t.Status == 0 && !t.TimedOut && t.Err == "" && len(t.Samples) > 0
}

// median is the middle of the samples (the mean of the two middle ones
// for an even count).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// readers are the phase's HTTP clients, one per viewer.
type readers struct {
	base    string
	clients map[viewer]*http.Client
	tokens  map[viewer]string
}

func newReaders(ctx context.Context, base string, acct volumeAccount) (*readers, error) {
	r := &readers{base: base, clients: map[viewer]*http.Client{}, tokens: map[viewer]string{asOwnerToken: acct.ownerToken, asAdminToken: acct.adminToken}}
	var err error
	if r.clients[asOwner], err = signIn(ctx, base, acct.ownerEmail, acct.ownerPassword); err != nil {
		return nil, err
	}
	if r.clients[asAdmin], err = signIn(ctx, base, acct.adminEmail, acct.adminPassword); err != nil {
		return nil, err
	}
	plain := newPageClient(nil)
	r.clients[asOwnerToken], r.clients[asAdminToken] = plain, plain
	return r, nil
}

// newPageClient keeps its cookies and does not follow redirects (a page
// that sends a reader away is reported with its status).
func newPageClient(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: pageTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signIn signs in as a browser does: the sign-in page for its CSRF token,
// then the form.
func signIn(ctx context.Context, base, email, password string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := newPageClient(jar)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/signin", nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(body)
	if m == nil {
		return nil, fmt.Errorf("sign in as %s: no CSRF token on /signin (%d)", email, resp.StatusCode)
	}
	form := url.Values{"email": {email}, "password": {password}, "_csrf": {string(m[1])}}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = c.Do(req); err != nil {
		return nil, err
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("sign in as %s: %d, want 303: %.300s", email, resp.StatusCode, body)
	}
	return c, nil
}

// get reads a page once (a 200 with its body, or an error).
func (r *readers) get(ctx context.Context, who viewer, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return "", err
	}
	if tok := r.tokens[who]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := r.clients[who].Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return string(body), nil
}

var (
	liveFeedTag  = regexp.MustCompile(`<div[^>]*class="live-feed"[^>]*>`)
	liveStateTag = regexp.MustCompile(`<input[^>]*class="live-state"[^>]*>`)
	hxGetAttr    = regexp.MustCompile(`hx-get="([^"]*)"`)
	nameAttr     = regexp.MustCompile(`name="([^"]*)"`)
	valueAttr    = regexp.MustCompile(`value="([^"]*)"`)
)

// liveFeedRequest is the request a page's live feed sends when told
// something changed, as htmx builds it: the feed's hx-get with the page's
// live-state inputs (what the page shows: its cursor, its cards'
// versions) as the query (views/live.templ).
func liveFeedRequest(page string) (string, error) {
	feed := liveFeedTag.FindString(page)
	get := hxGetAttr.FindStringSubmatch(feed)
	if get == nil {
		return "", errors.New("no live feed")
	}
	q := url.Values{}
	for _, in := range liveStateTag.FindAllString(page, -1) {
		name, value := nameAttr.FindStringSubmatch(in), valueAttr.FindStringSubmatch(in)
		if name != nil && value != nil {
			q.Add(html.UnescapeString(name[1]), html.UnescapeString(value[1]))
		}
	}
	u := html.UnescapeString(get[1])
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u, nil
}

// time reads one page up to samples times, sequentially.
func (r *readers) time(ctx context.Context, who viewer, path string, samples int) pageTiming {
	var t pageTiming
	var spent time.Duration
	for range samples {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
		if err != nil {
			t.Err = err.Error()
			break
		}
		if tok := r.tokens[who]; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		start := time.Now()
		resp, err := r.clients[who].Do(req)
		var n int64
		if err == nil {
			n, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		d := time.Since(start)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.TimedOut = true
		case err != nil:
			t.Err = err.Error()
		case resp.StatusCode != http.StatusOK && t.Status == 0:
			t.Status = resp.StatusCode
		}
		if err != nil {
			break
		}
		t.Samples, t.Bytes, spent = append(t.Samples, d), int(n), spent+d
		if spent > pageBudget && len(t.Samples) >= minPageSamples {
			break
		}
	}
	t.Median = median(t.Samples)
	return t
}

// pageContextNow reads what the pages' URLs need: the hot conversation's
// live feed from its page, a call from the database.
func pageContextNow(ctx context.Context, r *readers, pool *pgxpool.Pool, s *seeded, acct volumeAccount, now time.Time) (pageContext, error) {
	pc := pageContext{hot: s.hot, small: s.small, object: s.call, ownerEmail: acct.ownerEmail, now: now}
	page, err := r.get(ctx, asOwner, "/conversations/"+s.hot.String())
	if err != nil {
		return pc, err
	}
	if pc.hotFeed, err = liveFeedRequest(page); err != nil {
		return pc, fmt.Errorf("the hot conversation's page: %w", err)
	}
	// At volume, a call from three months ago: the history someone looks
	// up later, not the newest call.
	err = pool.QueryRow(ctx, `SELECT id FROM proposals WHERE workspace_id = $1 AND created_at < $2 ORDER BY created_at DESC LIMIT 1`,
		s.workspace, now.AddDate(0, -3, 0)).Scan(&pc.object)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // an empty database: the seeded call
		return pc, err
	}
	return pc, nil
}

// timePages times every page, printing a line per page.
func timePages(ctx context.Context, r *readers, pc pageContext, samples int, out io.Writer, state string) []pageTiming {
	timings := make([]pageTiming, len(volumePages))
	for i, p := range volumePages {
		timings[i] = r.time(ctx, p.who, p.path(pc), samples)
		fmt.Fprintf(out, "  %-8s %-38s %9s  %8s  %s\n", state, p.Name, fmtMedian(timings[i]), fmtBytes(timings[i].Bytes), timingNote(timings[i]))
	}
	return timings
}
