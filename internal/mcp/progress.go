package mcp

import "context"

// Progress takes a tool call's progress as MCP reports it: how far, of
// how much (0: unknown), and what it is doing.
type Progress func(progress, total float64, message string)

type progressKey struct{}

// WithProgress is ctx with where a call's progress goes: an agent's
// tools/call that named a progress token is told the upstream's progress
// (notifications/progress) while its call is forwarded.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

func progressOf(ctx context.Context) Progress {
	p, _ := ctx.Value(progressKey{}).(Progress)
	return p
}
