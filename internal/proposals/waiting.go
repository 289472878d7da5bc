package proposals

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Waiting is what needs a user: confirm cards in their conversations and
// notebooks, packets they may resolve, and how their agents' latest calls
// ended.
type Waiting struct {
	Cards    []WaitingCard
	Packets  []WaitingPacket
	Outcomes []AgentOutcome
}

// WaitingCard is a confirm card waiting for its owner.
type WaitingCard struct {
	ID                 uuid.UUID
	Tool, Effect, Risk string
	Scope              Scope
	ScopeTitle         string
	ProposedBy         string // "agent" or "user"
	TokenName          string
	CreatedAt          time.Time
}

// WaitingPacket is an approval packet the user may resolve.
type WaitingPacket struct {
	ID                   uuid.UUID
	Summary, Tool, Risk  string
	Effect, ApproverRole string
	ScopeTitle           string
	ExpiresAt            time.Time
}

// AgentOutcome is one call proposed with one of the user's agent tokens.
type AgentOutcome struct {
	ID         uuid.UUID
	Tool       string
	Status     string
	TokenName  string
	Scope      Scope
	ScopeTitle string
	CreatedAt  time.Time
	ResolvedAt *time.Time
}

// WaitingCounts counts what waits for the user (the header's badge).
// packets is exact up to WaitingPacketsCap; WaitingPacketsCap+1 means
// more than that.
func (s *Service) WaitingCounts(ctx context.Context, p auth.Principal) (cards, packets int, err error) {
	if p.IsAgent() {
		return 0, 0, nil
	}
	n, err := s.q.CountWaitingCards(ctx, db.CountWaitingCardsParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if err != nil {
		return 0, 0, fmt.Errorf("proposals: count waiting cards: %w", err)
	}
	var m int64
	if roles := resolvableRoles(p); len(roles) > 0 {
		// At most WaitingPacketsCap+1: the header says "99+" past the cap
		// (views.NavCounts), and the count reads a bounded number of
		// pending packets whatever the size of the queue.
		if m, err = s.q.CountPendingApprovals(ctx, db.CountPendingApprovalsParams{WorkspaceID: p.WorkspaceID, Budget: waitingPacketsBudget,
			Roles: roles, UserID: p.UserID, Cap: WaitingPacketsCap + 1}); err != nil {
			return 0, 0, fmt.Errorf("proposals: count packets: %w", err)
		}
	}
	return int(n), int(m), nil
}

// Waiting lists what needs the user (the home page). Packets are those of
// the roles the user holds, never their own proposals.
func (s *Service) Waiting(ctx context.Context, p auth.Principal) (Waiting, error) {
	var w Waiting
	if p.IsAgent() {
		return w, nil
	}
	cards, err := s.q.ListWaitingCards(ctx, db.ListWaitingCardsParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if err != nil {
		return w, fmt.Errorf("proposals: waiting cards: %w", err)
	}
	for _, r := range cards {
		w.Cards = append(w.Cards, WaitingCard{ID: r.ID, Tool: r.Tool, Effect: r.Effect, Risk: r.Risk.String, Scope: scopeOfIDs(r.ConversationID, r.NotebookID),
			ScopeTitle: r.ScopeTitle, ProposedBy: r.ProposedByKind, TokenName: r.TokenName, CreatedAt: r.CreatedAt})
	}
	if roles := resolvableRoles(p); len(roles) > 0 {
		packets, err := s.q.ListResolvablePackets(ctx, db.ListResolvablePacketsParams{WorkspaceID: p.WorkspaceID, Roles: roles, UserID: p.UserID})
		if err != nil {
			return w, fmt.Errorf("proposals: resolvable packets: %w", err)
		}
		for _, r := range packets {
			w.Packets = append(w.Packets, WaitingPacket{ID: r.ID, Summary: r.Summary, Tool: r.Tool, Risk: r.Risk.String, Effect: r.Effect,
				ApproverRole: r.ApproverRole, ScopeTitle: r.ScopeTitle, ExpiresAt: r.ExpiresAt})
		}
	}
	outcomes, err := s.q.ListAgentOutcomes(ctx, db.ListAgentOutcomesParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID})
	if err != nil {
		return w, fmt.Errorf("proposals: agent outcomes: %w", err)
	}
	for _, r := range outcomes {
		w.Outcomes = append(w.Outcomes, AgentOutcome{ID: r.ID, Tool: r.Tool, Status: r.Status, TokenName: r.TokenName,
			Scope: scopeOfIDs(r.ConversationID, r.NotebookID), ScopeTitle: r.ScopeTitle, CreatedAt: r.CreatedAt, ResolvedAt: r.ResolvedAt})
	}
	return w, nil
}
