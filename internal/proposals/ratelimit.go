package proposals

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// countRate counts the call against the tool's limits. A limit per agent
// on a read or an idempotent write is counted in memory and shared
// between instances off the call path (internal/ratelimit: those classes
// take the automatic path, and a counter row locked through each commit
// would cost them two thirds of their throughput); every other limit is
// counted in the proposal's transaction, in PostgreSQL, exact across
// instances (a refused call rolls back and is not counted). Over a limit,
// the error carries retry_after (whole seconds). counted says the limit
// per agent in memory has counted the call already.
func (s *Service) countRate(ctx context.Context, q *db.Queries, p auth.Principal, tool *tools.Tool, counted bool, now time.Time) error {
	rl := tool.Contract.RateLimits
	agent := agentBucket(p, tool)
	limits := []struct {
		bucket string
		limit  int
		window time.Duration
		what   string
	}{
		{agent, rl.PerAgentPerMinute, time.Minute, "per minute for this caller"},
		{"workspace:" + p.WorkspaceID.String() + ":" + tool.Name + ":hour", rl.PerWorkspacePerHour, time.Hour, "per hour in this workspace"},
		{"workspace:" + p.WorkspaceID.String() + ":" + tool.Name + ":day", rl.PerWorkspacePerDay, 24 * time.Hour, "per day in this workspace"},
	}
	for _, l := range limits {
		if l.limit <= 0 {
			continue
		}
		if l.bucket == agent && sharedLimit(tool.Contract.Authority) {
			if counted {
				continue
			}
			if ok, left := s.limiter.Take(l.bucket, l.limit, l.window, now); !ok {
				return rateLimited(tool, l.limit, l.what, left)
			}
			continue
		}
		start := now.Truncate(l.window)
		end := start.Add(l.window)
		n, err := q.CountRate(ctx, db.CountRateParams{Bucket: l.bucket, WindowStart: start, ExpiresAt: end})
		if err != nil {
			return fmt.Errorf("proposals: count rate: %w", err)
		}
		if int(n) > l.limit {
			return rateLimited(tool, l.limit, l.what, end.Sub(now))
		}
	}
	return nil
}

// agentBucket names the counter of a caller's calls of a tool: a token's,
// or a person's own.
func agentBucket(p auth.Principal, tool *tools.Tool) string {
	caller := "user:" + p.UserID.String()
	if p.IsAgent() {
		caller = "token:" + p.TokenID.String()
	}
	return "agent:" + caller + ":" + tool.Name
}

// sharedLimit reports whether a class's limits per agent are counted in
// memory and shared between instances rather than in the call's
// transaction: reads and idempotent writes, whose calls run at once.
func sharedLimit(a policy.Authority) bool {
	return a == policy.AuthorityRead || a == policy.AuthorityWriteIdempotent
}

// rateLimited is the refusal of a call over a limit, left before its
// window ends.
func rateLimited(tool *tools.Tool, limit int, what string, left time.Duration) error {
	e := apperr.Errorf(apperr.ERATELIMIT, "%s allows %d calls %s; try again in %s.", tool.Name, limit, what, left.Round(time.Second))
	e.Extra = map[string]any{"retry_after": int(math.Ceil(left.Seconds()))}
	return e
}
