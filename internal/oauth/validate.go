package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what a client may register: registration is open to anyone.
const (
	MaxClientName    = 100
	MaxRedirectURIs  = 5
	MaxRedirectURI   = 2000
	MaxRegistration  = 16 << 10 // bytes of a registration request
	maxResourceSize  = 2000
	maxStateSize     = 1000
	minVerifierSize  = 43
	maxVerifierSize  = 128
	challengeS256Len = 43
)

var (
	hostname      = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)
	codeChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	codeVerifier  = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)
)

// hasControlOrSpace reports whether s holds a space or a control character.
func hasControlOrSpace(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// isLoopbackHost reports whether host (without port) is a loopback
// address or localhost.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// CheckRedirectURI checks a redirect URI a client registers: an absolute
// https URL, or http on a loopback host (a native client's local
// listener, RFC 8252 §7.3); no fragment, no user info, a plain host name
// or IP address, at most MaxRedirectURI bytes. It returns why not, or "".
func CheckRedirectURI(raw string) string {
	if raw == "" || len(raw) > MaxRedirectURI || !utf8.ValidString(raw) || hasControlOrSpace(raw) {
		return "must be an absolute URL of at most 2000 characters, without spaces"
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" {
		return "must be an absolute URL"
	}
	if strings.Contains(raw, "#") {
		return "must not have a fragment"
	}
	if u.User != nil {
		return "must not carry a user name or password"
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err != nil && !hostname.MatchString(host) {
		return "must name a plain host name or IP address"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if isLoopbackHost(host) {
			return ""
		}
		return "must use https (http only on a loopback host: 127.0.0.1, [::1], localhost)"
	}
	return "must use https (http only on a loopback host)"
}

// MatchRedirectURI returns the registered redirect URI that requested
// names, or false. The match is exact, except that a loopback http URI
// may come with any port (RFC 8252 §7.3: a native client's listener gets
// a port from the system when it starts).
func MatchRedirectURI(registered []string, requested string) bool {
	if requested == "" || CheckRedirectURI(requested) != "" {
		return false
	}
	for _, r := range registered {
		if r == requested {
			return true
		}
	}
	req, err := url.Parse(requested)
	if err != nil || req.Scheme != "http" || !isLoopbackHost(req.Hostname()) {
		return false
	}
	for _, r := range registered {
		reg, err := url.Parse(r)
		if err != nil || reg.Scheme != "http" || !isLoopbackHost(reg.Hostname()) {
			continue
		}
		if reg.Hostname() == req.Hostname() && reg.EscapedPath() == req.EscapedPath() && reg.RawQuery == req.RawQuery {
			return true
		}
	}
	return false
}

// RedirectHost is the host (and port) a redirect URI sends people back
// to, as the consent page shows it.
func RedirectHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// RedirectOrigin is the origin (scheme://host[:port]) of a checked
// redirect URI, for the consent page's Content-Security-Policy.
func RedirectOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || CheckRedirectURI(raw) != "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// CanonicalResource is a resource indicator (RFC 8707) in one spelling:
// scheme and host lower-cased, the scheme's default port dropped, no
// trailing slash. It is false for anything that is not an absolute http
// or https URL without fragment, query or user info.
func CanonicalResource(raw string) (string, bool) {
	if raw == "" || len(raw) > maxResourceSize || !utf8.ValidString(raw) || hasControlOrSpace(raw) || strings.ContainsAny(raw, "#?") {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	name, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	host := name
	switch {
	case port != "":
		host = net.JoinHostPort(name, port)
	case strings.Contains(name, ":"):
		host = "[" + name + "]"
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/"), true
}

// SameResource reports whether two resource indicators name the same
// resource.
func SameResource(a, b string) bool {
	ca, ok := CanonicalResource(a)
	if !ok {
		return false
	}
	cb, ok := CanonicalResource(b)
	return ok && ca == cb
}

// VerifyPKCE reports whether verifier is the one whose S256 challenge is
// challenge (RFC 7636 §4.6), in constant time.
func VerifyPKCE(verifier, challenge string) bool {
	if !codeVerifier.MatchString(verifier) || !codeChallenge.MatchString(challenge) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// cleanClientName trims a client's name and checks it: at most
// MaxClientName characters, valid UTF-8, no control characters.
func cleanClientName(name string) (string, bool) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxClientName || strings.ContainsFunc(name, unicode.IsControl) {
		return "", false
	}
	return name, true
}
