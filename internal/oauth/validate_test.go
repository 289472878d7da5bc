package oauth_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/gatehouse/gatehouse/internal/oauth"
)

func TestCheckRedirectURI_HTTPSOrLoopbackHTTPOnly(t *testing.T) {
	t.Parallel()
	for uri, ok := range map[string]bool{
		"https://app.example.com/callback":                       true,
		"https://app.example.com:8443/cb?x=1":                    true,
		"http://127.0.0.1:33418/callback":                        true,
		"http://[::1]:33418/callback":                            true,
		"http://localhost:6274/oauth/callback":                   true,
		"http://127.0.0.2/cb":                                    true, // all of 127/8 is loopback
		"http://app.example.com/callback":                        false,
		"http://192.168.1.10/callback":                           false,
		"http://localhost.evil.example/callback":                 false,
		"cursor://anysphere.cursor-retrieval/oauth":              false,
		"javascript:alert(1)":                                    false,
		"https://app.example.com/cb#frag":                        false,
		"https://user:pw@app.example.com/cb":                     false,
		"https://app example.com/cb":                             false,
		"https://app.example.com/c b":                            false,
		"/callback":                                              false,
		"":                                                       false,
		"https://" + strings.Repeat("a", 2000) + ".example.com/": false,
		"https://app.example.com/\x00":                           false,
		"https://ex_ample.com/cb":                                false,
	} {
		if got := oauth.CheckRedirectURI(uri) == ""; got != ok {
			t.Errorf("CheckRedirectURI(%q) accepted = %v, want %v (%s)", uri, got, ok, oauth.CheckRedirectURI(uri))
		}
	}
}

func TestMatchRedirectURI_ExactOrLoopbackOnAnyPort(t *testing.T) {
	t.Parallel()
	registered := []string{"https://app.example.com/cb", "http://127.0.0.1:5000/callback"}
	for uri, ok := range map[string]bool{
		"https://app.example.com/cb":         true,
		"http://127.0.0.1:5000/callback":     true,
		"http://127.0.0.1:61234/callback":    true, // RFC 8252 §7.3
		"http://127.0.0.1/callback":          true,
		"https://app.example.com/cb/":        false,
		"https://app.example.com/cb?x=1":     false,
		"https://app.example.com:444/cb":     false,
		"http://127.0.0.1:5000/other":        false,
		"http://localhost:5000/callback":     false, // another host
		"http://127.0.0.1:5000/callback?a=b": false,
		"https://evil.example/cb":            false,
		"":                                   false,
	} {
		if got := oauth.MatchRedirectURI(registered, uri); got != ok {
			t.Errorf("MatchRedirectURI(%q) = %v, want %v", uri, got, ok)
		}
	}
}

func TestSameResource_OneSpellingPerResource(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp", true},
		{"HTTP://Example.COM/mcp", "http://example.com/mcp", true},
		{"https://example.com:443/mcp", "https://example.com/mcp", true},
		{"http://example.com:80/mcp/", "http://example.com/mcp", true},
		{"http://[::1]:8080/mcp", "http://[::1]:8080/mcp", true},
		{"http://127.0.0.1:8080/mcp", "http://localhost:8080/mcp", false},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8081/mcp", false},
		{"https://example.com/mcp", "http://example.com/mcp", false},
		{"https://example.com/mcp", "https://example.com/api/v1", false},
		{"https://example.com/mcp?x=1", "https://example.com/mcp", false},
		{"https://example.com/mcp#f", "https://example.com/mcp", false},
		{"urn:example:mcp", "urn:example:mcp", false},
		{"", "", false},
	} {
		if got := oauth.SameResource(c.a, c.b); got != c.same {
			t.Errorf("SameResource(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}

func TestVerifyPKCE_S256Only(t *testing.T) {
	t.Parallel()
	verifier := oauth2.GenerateVerifier()
	challenge := oauth2.S256ChallengeFromVerifier(verifier)
	if !oauth.VerifyPKCE(verifier, challenge) {
		t.Fatal("the verifier of its own S256 challenge is refused")
	}
	for name, c := range map[string][2]string{
		"another verifier":                 {oauth2.GenerateVerifier(), challenge},
		"plain: the verifier as challenge": {strings.Repeat("a", 43), strings.Repeat("a", 43)},
		"verifier too short":               {"abc", oauth2.S256ChallengeFromVerifier("abc")},
		"verifier too long":                {strings.Repeat("a", 129), oauth2.S256ChallengeFromVerifier(strings.Repeat("a", 129))},
		"verifier bad characters":          {strings.Repeat("a", 42) + "!", oauth2.S256ChallengeFromVerifier(strings.Repeat("a", 42) + "!")},
		"empty":                            {"", ""},
	} {
		if oauth.VerifyPKCE(c[0], c[1]) {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckRegistration_PublicClientsWithBoundedMetadata(t *testing.T) {
	t.Parallel()
	good := oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://127.0.0.1:3000/cb"}, ClientName: " My agent ",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}
	out, err := oauth.CheckRegistration(good)
	if err != nil {
		t.Fatal(err)
	}
	if out.ClientName != "My agent" || out.TokenEndpointAuthMethod != "none" || !slices.Equal(out.GrantTypes, []string{"authorization_code", "refresh_token"}) {
		t.Errorf("cleaned metadata: %+v", out)
	}
	many := make([]string, 6)
	for i := range many {
		many[i] = "https://app.example.com/cb" + string(rune('a'+i))
	}
	for name, c := range map[string]struct {
		edit func(*oauthex.ClientRegistrationMetadata)
		code string
	}{
		"no redirect URI":      {func(m *oauthex.ClientRegistrationMetadata) { m.RedirectURIs = nil }, oauth.ErrInvalidRedirectURI},
		"six redirect URIs":    {func(m *oauthex.ClientRegistrationMetadata) { m.RedirectURIs = many }, oauth.ErrInvalidRedirectURI},
		"plain http":           {func(m *oauthex.ClientRegistrationMetadata) { m.RedirectURIs = []string{"http://app.example.com/cb"} }, oauth.ErrInvalidRedirectURI},
		"custom scheme":        {func(m *oauthex.ClientRegistrationMetadata) { m.RedirectURIs = []string{"myapp://cb"} }, oauth.ErrInvalidRedirectURI},
		"confidential client":  {func(m *oauthex.ClientRegistrationMetadata) { m.TokenEndpointAuthMethod = "client_secret_basic" }, oauth.ErrInvalidClientMetadata},
		"client credentials":   {func(m *oauthex.ClientRegistrationMetadata) { m.GrantTypes = []string{"client_credentials"} }, oauth.ErrInvalidClientMetadata},
		"implicit":             {func(m *oauthex.ClientRegistrationMetadata) { m.ResponseTypes = []string{"token"} }, oauth.ErrInvalidClientMetadata},
		"name of 101":          {func(m *oauthex.ClientRegistrationMetadata) { m.ClientName = strings.Repeat("é", 101) }, oauth.ErrInvalidClientMetadata},
		"name with a newline":  {func(m *oauthex.ClientRegistrationMetadata) { m.ClientName = "a\nb" }, oauth.ErrInvalidClientMetadata},
		"bad application type": {func(m *oauthex.ClientRegistrationMetadata) { m.ApplicationType = "service" }, oauth.ErrInvalidClientMetadata},
	} {
		m := good
		c.edit(&m)
		_, err := oauth.CheckRegistration(m)
		if err == nil || err.Code != c.code || err.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
	if _, err := oauth.CheckRegistration(oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"https://a.example/cb"}, ClientName: strings.Repeat("é", 100)}); err != nil {
		t.Errorf("a name of 100 characters: %v", err)
	}
}

func TestParseRequest_NamesRepeatedParameters(t *testing.T) {
	t.Parallel()
	r := oauth.ParseRequest(url.Values{"client_id": {"a"}, "state": {"1", "2"}, "resource": {"x", "y"}})
	if !slices.Equal(r.Repeated, []string{"state", "resource"}) || r.ClientID != "a" {
		t.Fatalf("%+v", r)
	}
	if v := r.Values(); v.Get("client_id") != "a" || v.Get("state") != "1" {
		t.Fatalf("values: %v", v)
	}
}

func TestPendingRedirect_KeepsTheRedirectQueryAndAddsStateAndIssuer(t *testing.T) {
	t.Parallel()
	p := oauth.Pending{Request: oauth.Request{RedirectURI: "https://app.example.com/cb?tenant=7", State: "s&t"}, Issuer: "https://gh.example.com"}
	u, err := url.Parse(p.Redirect(url.Values{"code": {"abc"}}))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Host != "app.example.com" || u.Path != "/cb" || q.Get("tenant") != "7" || q.Get("code") != "abc" || q.Get("state") != "s&t" || q.Get("iss") != "https://gh.example.com" {
		t.Fatalf("redirect %s", u)
	}
	d, _ := url.Parse(p.Deny())
	if d.Query().Get("error") != "access_denied" || d.Query().Get("state") != "s&t" {
		t.Fatalf("deny %s", d)
	}
}

// What a request to /mcp with an OAuth token adds to the bearer check.
func BenchmarkSameResource(b *testing.B) {
	for b.Loop() {
		if !oauth.SameResource("http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp") {
			b.Fatal("not the same")
		}
	}
}
