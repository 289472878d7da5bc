package mcp

import (
	"context"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// addCheatsheets serves each tool's cheatsheet as a resource,
// gatehouse://tools/<name>/cheatsheet (markdown), read from the registry
// as it is when the client reads it.
func (g *Gateway) addCheatsheets(srv *sdk.Server) {
	for _, t := range g.registry.List() {
		if t.Cheatsheet == "" {
			continue
		}
		srv.AddResource(&sdk.Resource{
			URI: CheatsheetURI(t.Name), Name: t.Name + " cheatsheet", Title: "Cheatsheet: " + t.Name,
			Description: "How to use " + t.Name + " well; read it before any write.", MIMEType: "text/markdown",
		}, g.readCheatsheet)
	}
}

// readCheatsheet answers resources/read for a cheatsheet, with its ETag
// and how long it may be used before it is read again, in _meta
// (gatehouse/etag, gatehouse/max_age_seconds), as REST sends them in
// headers.
func (g *Gateway) readCheatsheet(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	name, ok := strings.CutPrefix(req.Params.URI, "gatehouse://tools/")
	if ok {
		name, ok = strings.CutSuffix(name, "/cheatsheet")
	}
	t, found := g.registry.Get(name)
	if !ok || !found || t.Cheatsheet == "" {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	meta := sdk.Meta{"gatehouse/etag": t.CheatsheetETag(), "gatehouse/max_age_seconds": int(tools.CheatsheetMaxAge.Seconds())}
	return &sdk.ReadResourceResult{Meta: meta, Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: t.Cheatsheet, Meta: meta}}}, nil
}
