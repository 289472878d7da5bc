package views

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A component call written in the middle of a line of text is text to
// templ: the page would show "@RelTime(c.When)". No generated file may
// carry a call as literal text.
func TestNoComponentCallRendersAsText(t *testing.T) {
	files, err := filepath.Glob("*_templ.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated files (%v)", err)
	}
	literal := regexp.MustCompile(`"[^"\n]*@[A-Z][A-Za-z]*\([^"\n]*"`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := literal.Find(b); m != nil {
			t.Errorf("%s renders a component call as text: %s", f, m)
		}
	}
}
