package proposals

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// countRate counts the call against the tool's limits, in the proposal's
// transaction: a refused call rolls back and is not counted, and the
// counters live in PostgreSQL, so a limit holds across server instances.
// Over a limit, the error carries retry_after (whole seconds).
func countRate(ctx context.Context, q *db.Queries, p auth.Principal, tool *tools.Tool, now time.Time) error {
	rl := tool.Contract.RateLimits
	caller := "user:" + p.UserID.String()
	if p.IsAgent() {
		caller = "token:" + p.TokenID.String()
	}
	limits := []struct {
		bucket string
		limit  int
		window time.Duration
		what   string
	}{
		{"agent:" + caller + ":" + tool.Name, rl.PerAgentPerMinute, time.Minute, "per minute for this caller"},
		{"workspace:" + p.WorkspaceID.String() + ":" + tool.Name + ":hour", rl.PerWorkspacePerHour, time.Hour, "per hour in this workspace"},
		{"workspace:" + p.WorkspaceID.String() + ":" + tool.Name + ":day", rl.PerWorkspacePerDay, 24 * time.Hour, "per day in this workspace"},
	}
	for _, l := range limits {
		if l.limit <= 0 {
			continue
		}
		start := now.Truncate(l.window)
		end := start.Add(l.window)
		n, err := q.CountRate(ctx, db.CountRateParams{Bucket: l.bucket, WindowStart: start, ExpiresAt: end})
		if err != nil {
			return fmt.Errorf("proposals: count rate: %w", err)
		}
		if int(n) > l.limit {
			e := apperr.Errorf(apperr.ERATELIMIT, "%s allows %d calls %s; try again in %s.", tool.Name, l.limit, l.what, end.Sub(now).Round(time.Second))
			e.Extra = map[string]any{"retry_after": int(math.Ceil(end.Sub(now).Seconds()))}
			return e
		}
	}
	return nil
}
