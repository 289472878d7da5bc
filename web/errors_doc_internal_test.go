package web

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// Every problem code the error handler can send is documented, with its
// status, in docs/errors.md.
func TestErrorCodes_AreAllDocumentedWithTheirStatus(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for code, status := range codeStatus {
		codes[code] = status
	}
	for status, code := range statusCode {
		codes[code] = status
	}
	for code, status := range codes {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(code) + "` \\| `urn:gatehouse:problem:" + regexp.QuoteMeta(code) + "` \\| " + strconv.Itoa(status) + " \\|")
		if !row.Match(doc) {
			t.Errorf("docs/errors.md has no row for the code %q with the status %d", code, status)
		}
	}
}
