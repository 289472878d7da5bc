package proposals

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// RecordPolicyVersion records the effective policy's version (the tool
// registry's hash: built-in contracts with the policy file's overrides,
// the upstreams' tools, the caller tools) when it differs from the last
// one recorded for the workspace: an audit row policy.changed with the
// new and previous hash and a setting-change receipt. The server calls it
// at start and whenever the registry changes (an upstream's tools listed
// again); instances that start together record a change once (an
// advisory lock). It reports whether it recorded one.
func (s *Service) RecordPolicyVersion(ctx context.Context, ws uuid.UUID) (bool, error) {
	hash := s.tools.Hash()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('gatehouse.policy_version'))"); err != nil {
		return false, fmt.Errorf("proposals: lock policy version: %w", err)
	}
	q := s.q.WithTx(tx)
	prev, err := q.LatestPolicyVersion(ctx, ws)
	if err != nil {
		return false, fmt.Errorf("proposals: read policy version: %w", err)
	}
	if prev == hash {
		return false, nil
	}
	change := map[string]any{"setting": "policy", "hash": hash, "previous": prev, "tools": len(s.tools.List())}
	system := auth.Principal{WorkspaceID: ws}
	if err := audit.Record(ctx, q, system, ws, "policy.changed", "policy", hash, change); err != nil {
		return false, err
	}
	if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.Actor{Kind: "system"}, ws, change, time.Now()); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("proposals: commit policy version: %w", err)
	}
	return true, nil
}
