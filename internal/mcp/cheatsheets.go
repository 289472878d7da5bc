package mcp

import (
	"context"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// cheatsheetTemplate is the cheatsheets' URI template (resources/templates/list),
// whose name argument completion/complete completes.
const cheatsheetTemplate = "gatehouse://tools/{name}/cheatsheet"

// syncCheatsheets makes the session's resources the registry's
// cheatsheets, gatehouse://tools/<name>/cheatsheet (markdown), read from
// the registry as it is when the client reads it: a tool that came gets
// its cheatsheet (the SDK tells the client its resources changed), a tool
// that went takes it away. It returns the URIs whose content changed, for
// the caller to tell their subscribers (notifications/resources/updated)
// once it holds no lock. s.mu is held.
func (s *session) syncCheatsheets(list []*tools.Tool) (updated []string) {
	want := map[string]bool{}
	for _, t := range list {
		if t.Cheatsheet == "" {
			continue
		}
		uri, etag := CheatsheetURI(t.Name), t.CheatsheetETag()
		want[uri] = true
		switch old, shown := s.sheets[uri]; {
		case !shown:
			s.srv.AddResource(&sdk.Resource{
				URI: uri, Name: t.Name + " cheatsheet", Title: "Cheatsheet: " + t.Name,
				Description: "How to use " + t.Name + " well; read it before any write.", MIMEType: "text/markdown",
			}, s.g.readCheatsheet)
		case old != etag:
			updated = append(updated, uri)
		}
		s.sheets[uri] = etag
	}
	var gone []string
	for uri := range s.sheets {
		if !want[uri] {
			gone = append(gone, uri)
			delete(s.sheets, uri)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveResources(gone...)
	}
	return updated
}

// cheatsheetName is the tool a cheatsheet's URI names.
func cheatsheetName(uri string) (string, bool) {
	name, ok := strings.CutPrefix(uri, "gatehouse://tools/")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(name, "/cheatsheet")
}

// subscribe accepts a subscription to a cheatsheet (told when it changes:
// notifications/resources/updated); any other URI is not found.
func (g *Gateway) subscribe(_ context.Context, req *sdk.SubscribeRequest) error {
	if name, ok := cheatsheetName(req.Params.URI); ok {
		if t, found := g.registry.Get(name); found && t.Cheatsheet != "" {
			return nil
		}
	}
	return sdk.ResourceNotFoundError(req.Params.URI)
}

func unsubscribe(context.Context, *sdk.UnsubscribeRequest) error { return nil }

// maxCompletions is the most values completion/complete answers.
const maxCompletions = 100

// complete answers completion/complete: the cheatsheet template's name
// argument completes to the tools with a cheatsheet whose names begin
// with the value typed; Gatehouse has no prompts, so any other reference
// completes to nothing.
func (g *Gateway) complete(_ context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	res := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	p := req.Params
	if p == nil || p.Ref == nil || p.Ref.Type != "ref/resource" || p.Ref.URI != cheatsheetTemplate || p.Argument.Name != "name" {
		return res, nil
	}
	var names []string
	for _, t := range g.registry.List() {
		if t.Cheatsheet != "" && strings.HasPrefix(t.Name, p.Argument.Value) {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	res.Completion.Total = len(names)
	if len(names) > maxCompletions {
		names, res.Completion.HasMore = names[:maxCompletions], true
	}
	res.Completion.Values = names
	return res, nil
}

// readCheatsheet answers resources/read for a cheatsheet, with its ETag
// and how long it may be used before it is read again, in _meta
// (gatehouse/etag, gatehouse/max_age_seconds), as REST sends them in
// headers.
func (g *Gateway) readCheatsheet(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	name, ok := cheatsheetName(req.Params.URI)
	t, found := g.registry.Get(name)
	if !ok || !found || t.Cheatsheet == "" {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	meta := sdk.Meta{"gatehouse/etag": t.CheatsheetETag(), "gatehouse/max_age_seconds": int(tools.CheatsheetMaxAge.Seconds())}
	return &sdk.ReadResourceResult{Meta: meta, Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: t.Cheatsheet, Meta: meta}}}, nil
}
