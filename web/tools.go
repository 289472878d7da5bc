package web

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/views"
)

// toolsPage handles "GET /tools".
func (s *Server) toolsPage(c echo.Context) error {
	list := s.props.Tools()
	items := make([]views.ToolItem, len(list))
	for i, t := range list {
		var schema bytes.Buffer
		if err := json.Indent(&schema, t.Schema, "", "  "); err != nil {
			return err
		}
		items[i] = views.ToolItem{Name: t.Name, Description: t.Description, Effect: string(t.Effect), Schema: schema.String(), Params: t.Params()}
	}
	return render(c, http.StatusOK, views.ToolsPage(s.shell(c, "Tools", "tools"), items))
}
