package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// apiToolCheatsheet handles "GET /api/v1/tools/:name/cheatsheet": the
// tool's cheatsheet as markdown, with an ETag (If-None-Match → 304).
func (s *Server) apiToolCheatsheet(c echo.Context) error {
	t, ok := s.props.Tool(c.Param("name"))
	if !ok || t.Cheatsheet == "" {
		return apperr.Errorf(apperr.ENOTFOUND, "No cheatsheet for a tool named %q.", c.Param("name"))
	}
	// Cacheable for an hour, then revalidated with its ETag (304 when
	// unchanged): a cheatsheet changes only with the tools' declarations.
	etag := t.CheatsheetETag()
	c.Response().Header().Set("ETag", etag)
	c.Response().Header().Set(echo.HeaderCacheControl, fmt.Sprintf("private, max-age=%d", int(tools.CheatsheetMaxAge.Seconds())))
	for _, tag := range strings.Split(c.Request().Header.Get("If-None-Match"), ",") {
		if tag = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tag), "W/")); tag == etag || tag == "*" {
			return c.NoContent(http.StatusNotModified)
		}
	}
	return c.Blob(http.StatusOK, "text/markdown; charset=utf-8", []byte(t.Cheatsheet))
}
