package mcp

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// ParseOrigin reads an origin (scheme://host[:port]), as a browser sends
// it in the Origin header and as GATEHOUSE_MCP_ALLOWED_ORIGINS lists it,
// into one form: lowercase, without the scheme's default port. Only http
// and https origins are origins here; "null" (an opaque origin), a path,
// a query, credentials or a wildcard are refused.
func ParseOrigin(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "null" || strings.Contains(s, "*") {
		return "", errors.New("not an origin")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("not an origin")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", errors.New("an origin is http:// or https://")
	case u.Host == "" || u.Opaque != "":
		return "", errors.New("an origin names a host")
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("an origin is scheme://host[:port], with no credentials, path, query or fragment")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", errors.New("an origin names a host")
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// loopbackOrigin reports whether origin's host is a loopback address or
// localhost: a host no DNS-rebinding page can have, since the name in its
// address bar is the attacker's.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// AllowsOrigin reports whether a request with this Origin header may
// reach /mcp. self is the server's origin as the request addressed it
// (scheme://Host). Allowed: no Origin at all (a client that is not a
// browser); an origin of the configured allow-list; the server's own
// origin when it is a loopback address or localhost. A Host that merely
// matches the Origin proves nothing (a rebound name sends both), so any
// other own origin must be listed.
func (g *Gateway) AllowsOrigin(origin, self string) bool {
	if origin == "" {
		return true
	}
	o, err := ParseOrigin(origin)
	if err != nil {
		return false
	}
	if slices.Contains(g.origins, o) {
		return true
	}
	s, err := ParseOrigin(self)
	return err == nil && o == s && loopbackOrigin(o)
}

// RefuseForeignOrigin answers 403, with a JSON-RPC error (no id) as the
// MCP specification shows, when r comes from a browser page of an origin
// that may not call /mcp (DNS rebinding, a cross-site request), and
// reports whether it did. Nothing else runs for such a request.
func (g *Gateway) RefuseForeignOrigin(w http.ResponseWriter, r *http.Request, self string) bool {
	origin := r.Header.Get("Origin")
	if g.AllowsOrigin(origin, self) {
		return false
	}
	g.log.Warn("mcp: refused a request from a foreign origin", "origin", origin, "host", r.Host, "method", r.Method)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code":    -32600,
		"message": "Forbidden: the Origin " + originForMessage(origin) + " may not call this MCP endpoint. An admin lists allowed origins in GATEHOUSE_MCP_ALLOWED_ORIGINS.",
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	w.Write(body)
	return true
}

// originForMessage quotes an Origin header for the refusal, bounded.
func originForMessage(origin string) string {
	if len(origin) > 200 {
		origin = origin[:200] + "…"
	}
	b, _ := json.Marshal(origin)
	return string(b)
}
