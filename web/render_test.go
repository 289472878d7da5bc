package web_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// A page goes out whole, with its length: rendered first, then written
// once (not streamed in chunks of templ's buffer).
func TestRender_APageIsSentWholeWithItsLength(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.user("len@example.com", auth.RoleMember)
	for _, path := range []string{"/", "/conversations", "/signin"} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) || len(resp.TransferEncoding) != 0 {
			t.Errorf("%s: Content-Length %q and transfer encoding %v for a body of %d bytes", path, got, resp.TransferEncoding, len(body))
		}
	}
}
