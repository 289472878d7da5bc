// Package audit writes audit rows inside the caller's transaction, so an
// action and its audit row commit together or not at all.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
)

// Actor is whoever acted; auth.Principal is one. It is an interface, not
// auth.Principal itself, so that auth can audit its own changes (approver
// roles) without an import cycle.
type Actor interface {
	// AuditIdentity returns the acting user and token (uuid.Nil when there
	// is none) and whether an agent acted. No user means the system.
	AuditIdentity() (userID, tokenID uuid.UUID, agent bool)
}

// actor returns the actor columns for a principal; a zero principal is the system.
func actor(p Actor) (kind string, user, token uuid.NullUUID) {
	userID, tokenID, agent := p.AuditIdentity()
	switch {
	case userID == uuid.Nil:
		return "system", user, token
	case agent:
		kind = "agent"
	default:
		kind = "user"
	}
	user = uuid.NullUUID{UUID: userID, Valid: true}
	if tokenID != uuid.Nil {
		token = uuid.NullUUID{UUID: tokenID, Valid: true}
	}
	return kind, user, token
}

// DefaultRetention keeps audit rows that are not about a tool call (sign-in
// settings, trust changes…) for a year.
const DefaultRetention = 365 * 24 * time.Hour

// Record writes one audit row, kept for DefaultRetention.
func Record(ctx context.Context, q *db.Queries, p Actor, workspaceID uuid.UUID, action, subjectType, subjectID string, data map[string]any) error {
	return RecordRetained(ctx, q, p, workspaceID, DefaultRetention, action, subjectType, subjectID, data)
}

// RecordRetained writes one audit row kept for the given time (a tool
// call's rows are kept as long as its contract says).
func RecordRetained(ctx context.Context, q *db.Queries, p Actor, workspaceID uuid.UUID, keep time.Duration, action, subjectType, subjectID string, data map[string]any) error {
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
		RetentionUntil: time.Now().Add(keep),
	}); err != nil {
		return fmt.Errorf("audit: %s: %w", action, err)
	}
	return nil
}

// KindOf is how an audit row names the actor: user, agent or system.
func KindOf(p Actor) string {
	kind, _, _ := actor(p)
	return kind
}
