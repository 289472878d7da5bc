package proposals

import (
	"context"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Check is Get for an agent asking over MCP (check_proposal) what became
// of its call, with why it asks: ADR-036 requires a rationale on every
// MCP tool and keeps it in the audit log (proposal.checked), kept as long
// as the call's own rows. Someone else's proposal is not found, and
// nothing is written.
func (s *Service) Check(ctx context.Context, p auth.Principal, id uuid.UUID, rationale string) (Proposal, error) {
	prop, err := s.Get(ctx, p, id)
	if err != nil {
		return Proposal{}, err
	}
	keep := audit.DefaultRetention
	if t, ok := s.toolOf(prop.Tool, prop.declaration); ok {
		keep = t.Contract.Retention
	}
	if err := audit.RecordRetained(ctx, s.q, p, p.WorkspaceID, keep, "proposal.checked", "proposal", id.String(),
		map[string]any{"tool": prop.Tool, "status": prop.Status, "rationale": rationale}); err != nil {
		return Proposal{}, err
	}
	return prop, nil
}
