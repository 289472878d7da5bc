// Package audit writes audit rows inside the caller's transaction, so an
// action and its audit row commit together or not at all.
package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Actor returns the actor columns for a principal; a zero principal is the system.
func actor(p auth.Principal) (kind string, user, token uuid.NullUUID) {
	switch {
	case p.UserID == uuid.Nil:
		return "system", user, token
	case p.IsAgent():
		kind = "agent"
	default:
		kind = "user"
	}
	user = uuid.NullUUID{UUID: p.UserID, Valid: true}
	if p.TokenID != uuid.Nil {
		token = uuid.NullUUID{UUID: p.TokenID, Valid: true}
	}
	return kind, user, token
}

// Record writes one audit row.
func Record(ctx context.Context, q *db.Queries, p auth.Principal, workspaceID uuid.UUID, action, subjectType, subjectID string, data map[string]any) error {
	kind, user, token := actor(p)
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("audit: encode %s: %w", action, err)
	}
	if _, err := q.InsertAuditEvent(ctx, db.InsertAuditEventParams{
		WorkspaceID: workspaceID, ActorKind: kind, ActorUserID: user, ActorTokenID: token,
		Action: action, SubjectType: subjectType, SubjectID: subjectID, Data: b,
	}); err != nil {
		return fmt.Errorf("audit: %s: %w", action, err)
	}
	return nil
}
