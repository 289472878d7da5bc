package web

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxRedirectLen bounds a redirect target; longer ones fall back to "/".
const maxRedirectLen = 2000

// safeRedirect returns next when a browser can only read it as a path on
// this origin, and "/" otherwise. It accepts an absolute path that starts
// with a single "/" and refuses anything a browser could turn into another
// origin or a scheme: "//host" and "/\host", backslashes anywhere (browsers
// read them as "/"), tabs, CR, LF and every other control character
// (browsers drop some of them, so "/\t/host" becomes "//host"), the same in
// percent-encoded form (%09, %0d, %5c, and encoded twice), invalid UTF-8,
// and values longer than maxRedirectLen.
func safeRedirect(next string) string {
	if next == "" || len(next) > maxRedirectLen || !utf8.ValidString(next) {
		return "/"
	}
	// Check the value as sent and each percent-decoding of it, so what a
	// proxy or a browser might decode is held to the same rules.
	s := next
	for decoded := 0; ; decoded++ {
		if !plainLocalPath(s) {
			return "/"
		}
		dec, err := url.PathUnescape(s)
		if err != nil || !utf8.ValidString(dec) {
			return "/"
		}
		if dec == s {
			break
		}
		if decoded == 2 {
			return "/" // encoded three times or more: nobody means that
		}
		s = dec
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	return next
}

// plainLocalPath reports whether s starts with a single "/" and holds no
// backslash and no control character.
func plainLocalPath(s string) bool {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/\\") {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r == '\\' || unicode.IsControl(r) })
}
