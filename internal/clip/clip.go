// Package clip shortens text to a number of characters (Unicode code
// points, the unit every length limit in Gatehouse is stated in).
package clip

import "unicode/utf8"

// Runes is s cut to at most n characters.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Ellipsis is s cut to at most n characters (n at least 1), the last one
// an ellipsis when anything was cut.
func Ellipsis(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
