package proposals

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// The shadow preview: before a person raises a permission mode, a trust
// level or a workspace setting, they see how the last 100 calls would have
// been decided under the new setting — how many would have run without
// asking, per action class, and which of those a person had rejected or
// edited. It re-runs the pure decision over the inputs each call was
// decided on (kept on the proposal); nothing runs.

// Preview is what a setting would have changed.
type Preview struct {
	// Setting and Value are what would change ("permission_mode", "auto").
	Setting, Value string
	// Calls is how many recorded calls were decided again.
	Calls int
	// WouldRun is how many of them would have run without asking;
	// RanWithoutAsking how many did.
	WouldRun, RanWithoutAsking int
	Classes                    []PreviewClass
}

// PreviewClass is the preview for one action class.
type PreviewClass struct {
	ActionClass string
	Calls       int
	// WouldRun would have run without asking under the new setting.
	WouldRun int
	// Newly would have run without asking where they asked before.
	Newly int
	// Overruled are calls that would have run without asking but that a
	// person rejected or edited: what the new setting would have let
	// through that people did not want as proposed.
	Overruled []PreviewCall
}

// PreviewCall is one recorded call in a preview.
type PreviewCall struct {
	ID        uuid.UUID
	Tool      string
	Status    string
	Edited    bool
	CreatedAt time.Time
}

// previewRow is a recorded call and the inputs it was decided on.
type previewRow struct {
	id        uuid.UUID
	tool      string
	status    string
	class     string
	edited    bool
	input     []byte
	createdAt time.Time
}

// PreviewScope previews a new permission mode (conversation) or trust
// level (notebook) for the owner of the scope.
func (s *Service) PreviewScope(ctx context.Context, p auth.Principal, scope Scope, value string) (Preview, error) {
	change := func(c *policy.Call) {}
	var setting string
	switch scope.Kind {
	case ScopeConversation:
		mode := policy.PermissionMode(value)
		if !mode.Valid() {
			return Preview{}, apperr.Invalid("The permission mode must be approve or auto.", apperr.FieldError{Field: "permission_mode", Message: "must be approve or auto"})
		}
		setting, change = "permission_mode", func(c *policy.Call) { c.Mode = mode }
	case ScopeNotebook:
		trust := policy.TrustLevel(value)
		if !trust.Valid() {
			return Preview{}, apperr.Invalid("The trust level must be cautious, trusted or autonomous.", apperr.FieldError{Field: "trust_level", Message: "must be cautious, trusted or autonomous"})
		}
		setting, change = "trust_level", func(c *policy.Call) { c.Trust = trust }
	default:
		return Preview{}, fmt.Errorf("proposals: unknown scope %q", scope.Kind)
	}
	// Owner-scoped: someone else's scope is not found.
	if err := s.ownsScope(ctx, s.q, p, scope); err != nil {
		return Preview{}, err
	}
	params := db.ListRecentDecidedParams{WorkspaceID: p.WorkspaceID}
	if scope.Kind == ScopeConversation {
		params.ConversationID = nullUUID(scope.ID)
	} else {
		params.NotebookID = nullUUID(scope.ID)
	}
	rows, err := s.q.ListRecentDecided(ctx, params)
	if err != nil {
		return Preview{}, fmt.Errorf("proposals: recent calls: %w", err)
	}
	return s.preview(setting, value, previewRows(rows), change)
}

// PreviewWorkspace previews a workspace setting for an admin: today,
// auto_approve_high_risk.
func (s *Service) PreviewWorkspace(ctx context.Context, p auth.Principal, setting string, value bool) (Preview, error) {
	if p.IsAgent() || !p.IsAdmin() {
		return Preview{}, apperr.Errorf(apperr.EFORBIDDEN, "Only admins preview workspace settings.")
	}
	if setting != "auto_approve_high_risk" {
		return Preview{}, apperr.Invalid("Only auto_approve_high_risk can be previewed.", apperr.FieldError{Field: "setting", Message: "must be auto_approve_high_risk"})
	}
	rows, err := s.q.ListRecentDecidedInWorkspace(ctx, p.WorkspaceID)
	if err != nil {
		return Preview{}, fmt.Errorf("proposals: recent calls: %w", err)
	}
	same := make([]db.ListRecentDecidedRow, len(rows))
	for i, r := range rows {
		same[i] = db.ListRecentDecidedRow(r)
	}
	return s.preview(setting, fmt.Sprint(value), previewRows(same), func(c *policy.Call) { c.AutoApproveHighRisk = value })
}

// previewRows are the recorded calls a preview decides again.
func previewRows(rows []db.ListRecentDecidedRow) []previewRow {
	out := make([]previewRow, len(rows))
	for i, r := range rows {
		out[i] = previewRow{r.ID, r.Tool, r.Status, r.ActionClass.String, r.Edited, r.DecisionInput, r.CreatedAt}
	}
	return out
}

// preview decides each recorded call again with change applied.
func (s *Service) preview(setting, value string, rows []previewRow, change func(*policy.Call)) (Preview, error) {
	out := Preview{Setting: setting, Value: value}
	byClass := map[string]*PreviewClass{}
	for _, r := range rows {
		before, after, err := policy.Redecide(r.input, s.tools.Classes(), change)
		if err != nil {
			return Preview{}, fmt.Errorf("proposals: decode decision input of %s: %w", r.id, err)
		}
		class := r.class
		if class == "" {
			class = "(unclassified)"
		}
		pc := byClass[class]
		if pc == nil {
			pc = &PreviewClass{ActionClass: class}
			byClass[class] = pc
		}
		out.Calls++
		pc.Calls++
		ranBefore := before.State.RunsWithoutAsking()
		if ranBefore {
			out.RanWithoutAsking++
		}
		if !after.State.RunsWithoutAsking() {
			continue
		}
		out.WouldRun++
		pc.WouldRun++
		if !ranBefore {
			pc.Newly++
		}
		if r.status == StatusRejected || r.edited {
			pc.Overruled = append(pc.Overruled, PreviewCall{ID: r.id, Tool: r.tool, Status: r.status, Edited: r.edited, CreatedAt: r.createdAt})
		}
	}
	for _, pc := range byClass {
		out.Classes = append(out.Classes, *pc)
	}
	sort.Slice(out.Classes, func(i, j int) bool { return out.Classes[i].ActionClass < out.Classes[j].ActionClass })
	return out, nil
}

// scopeClassCalls is how many of a scope's latest calls say which classes
// it uses (the header's graduation hints): a bounded read of its index.
const scopeClassCalls = 1000

// ScopeClasses are the action classes the scope's latest calls were
// decided as (the latest scopeClassCalls; the caller checked the scope is
// theirs).
func (s *Service) ScopeClasses(ctx context.Context, p auth.Principal, scope Scope) ([]string, error) {
	params := db.ListScopeClassesParams{WorkspaceID: p.WorkspaceID, MaxCalls: scopeClassCalls}
	if scope.Kind == ScopeConversation {
		params.ConversationID = nullUUID(scope.ID)
	} else {
		params.NotebookID = nullUUID(scope.ID)
	}
	classes, err := s.q.ListScopeClasses(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("proposals: scope classes: %w", err)
	}
	return classes, nil
}
