package web

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

func TestSafeRedirect_KeepsOnlySameOriginPaths(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, next, want string }{
		{"empty", "", "/"},
		{"root", "/", "/"},
		{"a page", "/admin", "/admin"},
		{"a page with a query", "/admin/approvals?status=pending&tool=email.send", "/admin/approvals?status=pending&tool=email.send"},
		{"an escaped query", "/signin?next=%2Fadmin", "/signin?next=%2Fadmin"},
		{"a fragment", "/conversations/1#card", "/conversations/1#card"},
		{"non-ASCII", "/notes/café", "/notes/café"},
		{"a colon in the path", "/a:b", "/a:b"},
		{"a scheme-like path", "/javascript:alert(1)", "/javascript:alert(1)"},
		{"protocol-relative", "//evil.example", "/"},
		{"protocol-relative with a path", "//evil.example/admin", "/"},
		{"slash backslash", "/\\evil.example", "/"},
		{"backslash slash", "\\/evil.example", "/"},
		{"backslash later", "/admin\\..\\x", "/"},
		{"triple slash", "///evil.example", "/"},
		{"https", "https://evil.example", "/"},
		{"http", "http://evil.example/", "/"},
		{"javascript", "javascript:alert(1)", "/"},
		{"data", "data:text/html,<script>alert(1)</script>", "/"},
		{"relative", "admin", "/"},
		{"dot relative", "./admin", "/"},
		{"host only", "evil.example", "/"},
		{"leading space", " /admin", "/"},
		{"tab between slashes", "/\t/evil.example", "/"},
		{"newline between slashes", "/\n/evil.example", "/"},
		{"CR between slashes", "/\r/evil.example", "/"},
		{"CRLF header injection", "/admin\r\nSet-Cookie: x=1", "/"},
		{"NUL", "/admin\x00", "/"},
		{"DEL", "/admin\x7f", "/"},
		{"C1 control", "/admin\u0085", "/"},
		{"encoded tab", "/%09/evil.example", "/"},
		{"encoded CR", "/%0d/evil.example", "/"},
		{"encoded LF", "/admin%0A", "/"},
		{"encoded NUL", "/admin%00", "/"},
		{"encoded backslash", "/%5cevil.example", "/"},
		{"encoded backslash upper", "/%5Cevil.example", "/"},
		{"encoded slash prefix", "/%2f%2fevil.example", "/"},
		{"encoded slash", "/%2Fevil.example", "/"},
		{"double-encoded backslash", "/%255cevil.example", "/"},
		{"double-encoded tab", "/%2509/evil.example", "/"},
		{"triple-encoded", "/a%25252F", "/"},
		{"bad escape", "/admin%zz", "/"},
		{"invalid UTF-8", "/admin\xff", "/"},
		{"encoded invalid UTF-8", "/admin%ff", "/"},
		{"too long", "/" + strings.Repeat("a", maxRedirectLen), "/"},
		{"just long enough", "/" + strings.Repeat("a", maxRedirectLen-1), "/" + strings.Repeat("a", maxRedirectLen-1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := safeRedirect(tc.next); got != tc.want {
				t.Errorf("safeRedirect(%q) = %q, want %q", tc.next, got, tc.want)
			}
		})
	}
}

// FuzzSafeRedirect checks that whatever safeRedirect returns is a path on
// this origin: a single leading "/", no backslash or control character,
// and no scheme or host when parsed as a URL.
func FuzzSafeRedirect(f *testing.F) {
	for _, seed := range []string{"/", "/admin?x=1#y", "//evil.example", "/\\evil.example", "/\t/evil.example", "/%09/x", "/%5cx", "https://evil.example", "javascript:alert(1)"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeRedirect(next)
		if got != "/" && got != next {
			t.Fatalf("safeRedirect(%q) = %q: neither the input nor the fallback", next, got)
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.HasPrefix(got, "/\\") {
			t.Fatalf("safeRedirect(%q) = %q: not a single leading slash", next, got)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
			t.Fatalf("safeRedirect(%q) = %q: a backslash or a control character", next, got)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("safeRedirect(%q) = %q: does not parse: %v", next, got, err)
		}
		if u.Scheme != "" || u.Host != "" {
			t.Fatalf("safeRedirect(%q) = %q: scheme %q host %q", next, got, u.Scheme, u.Host)
		}
	})
}
