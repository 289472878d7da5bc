package clip

import "testing"

func TestClip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s          string
		n          int
		runes, ell string
	}{
		{"short", 10, "short", "short"},
		{"exactly10!", 10, "exactly10!", "exactly10!"},
		{"Verlängerung", 6, "Verlän", "Verlä…"},
		{"日本語のテキスト", 3, "日本語", "日本…"},
	} {
		if got := Runes(c.s, c.n); got != c.runes {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.s, c.n, got, c.runes)
		}
		if got := Ellipsis(c.s, c.n); got != c.ell {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", c.s, c.n, got, c.ell)
		}
	}
}
