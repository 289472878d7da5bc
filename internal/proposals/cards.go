package proposals

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
)

// MaxCards bounds the proposals one read of cards returns: a transcript
// page's tool lines, or the cards a live page says it shows.
const MaxCards = 500

// People are the names a proposal's card shows, as read with it: the
// email of the user it was made for and of who decided it, and the token
// that made it. An empty field is a name that is gone (or none).
type People struct {
	ProposerEmail, DeciderEmail string
	TokenName, TokenKind        string
}

// Card is a proposal with the names its card shows.
type Card struct {
	Proposal
	People People
}

// ConversationCards returns the conversation's proposals among ids (at
// most MaxCards of them; more is an error of the caller's), with their
// people, in one query by primary key. The caller has checked that the
// conversation is the principal's; an id of another conversation is not
// found.
func (s *Service) ConversationCards(ctx context.Context, workspace, conversation uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]Card, error) {
	if len(ids) == 0 {
		return map[uuid.UUID]Card{}, nil
	}
	if len(ids) > MaxCards {
		return nil, fmt.Errorf("proposals: %d cards asked for, at most %d", len(ids), MaxCards)
	}
	rows, err := s.q.ListConversationCards(ctx, db.ListConversationCardsParams{Ids: ids, WorkspaceID: workspace,
		ConversationID: nullUUID(conversation), MaxCards: MaxCards})
	if err != nil {
		return nil, fmt.Errorf("proposals: cards: %w", err)
	}
	out := make(map[uuid.UUID]Card, len(rows))
	for _, r := range rows {
		out[r.Proposal.ID] = Card{Proposal: fromRow(r.Proposal), People: People{ProposerEmail: r.ProposerEmail,
			DeciderEmail: r.DeciderEmail, TokenName: r.TokenName, TokenKind: r.TokenKind}}
	}
	return out, nil
}
