package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// With GATEHOUSE_PUBLIC_URL set (behind a proxy whose Host differs), the
// OAuth documents and the 401 name that origin, whatever Host the request
// came with; the resource tokens are bound to is its /mcp.
func TestOAuth_ThePublicURLIsTheIssuer(t *testing.T) {
	t.Parallel()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	const public = "https://gatehouse.example.com"
	e := newEnvConfig(t, dbtest.MustPool(t), registry, web.Config{CookieSecure: true, IssuerURL: public})
	get := func(path string) map[string]any {
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		json.NewDecoder(resp.Body).Decode(&doc)
		return doc
	}
	if doc := get("/.well-known/oauth-protected-resource/mcp"); doc["resource"] != public+"/mcp" || doc["authorization_servers"].([]any)[0] != public {
		t.Errorf("protected resource metadata: %v", doc)
	}
	if doc := get("/.well-known/oauth-authorization-server"); doc["issuer"] != public || !strings.HasPrefix(doc["token_endpoint"].(string), public+"/") {
		t.Errorf("authorization server metadata: %v", doc)
	}
	resp, err := http.Post(e.url+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ch := resp.Header.Get("WWW-Authenticate"); !strings.Contains(ch, `resource_metadata="`+public+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("the 401's challenge: %q", ch)
	}
}
