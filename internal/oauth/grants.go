package oauth

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Grant is what /tokens shows of an agent token that an OAuth consent
// created: the client as it named itself (unverified), where it sends
// people back, when the current access token expires, and the
// conversation or notebook its sessions are bound to.
type Grant struct {
	TokenID       uuid.UUID
	ClientName    string
	RedirectHosts []string
	// AccessExpiresAt is when the current access token stops working; the
	// token's own expiry is the grant's end (its refresh token's).
	AccessExpiresAt   *time.Time
	Audience          string
	Conversation      uuid.UUID
	ConversationTitle string
	Notebook          uuid.UUID
	NotebookTitle     string
}

// Grants returns the grants among tokens (ids the caller was allowed to
// list), by token id; tokens that are not grants are absent.
func (s *Service) Grants(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Grant, error) {
	out := map[uuid.UUID]Grant{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.q.ListOAuthGrants(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("oauth: list grants: %w", err)
	}
	for _, r := range rows {
		g := Grant{TokenID: r.ID, ClientName: r.ClientName, AccessExpiresAt: r.SecretExpiresAt, Audience: r.Audience.String,
			Conversation: r.ConversationID.UUID, ConversationTitle: r.ConversationTitle.String,
			Notebook: r.NotebookID.UUID, NotebookTitle: r.NotebookTitle.String}
		for _, u := range r.RedirectUris {
			if h := RedirectHost(u); h != "" && !slices.Contains(g.RedirectHosts, h) {
				g.RedirectHosts = append(g.RedirectHosts, h)
			}
		}
		out[r.ID] = g
	}
	return out, nil
}
