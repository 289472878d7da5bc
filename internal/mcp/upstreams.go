package mcp

import (
	"context"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// Upstreams are the MCP servers behind the gate.
type Upstreams struct{}

// Callable says whether an upstream tool may be called now.
func (u *Upstreams) Callable(ctx context.Context, t *tools.Tool) error { return nil }
