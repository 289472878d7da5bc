package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// volumeAccount is who the volume phase acts as: the owner of the
// conversations (a member, whose agent makes the calls), and an admin who
// approves packets and reads the admin pages.
type volumeAccount struct {
	ownerEmail, ownerPassword string
	adminEmail, adminPassword string
	agent, ownerToken         string // the owner's agent token and user token
	adminToken                string // the admin's user token
}

// seeded is what the seeded calls left: the two conversations every page
// timing reads (the hot one and a small one), a call whose history the
// audit page looks up, and the templates the fill copies.
type seeded struct {
	workspace      uuid.UUID
	hot, small     uuid.UUID
	call           uuid.UUID // the auto-applied records.put
	calls          map[callKind]*template
	conversation   map[bool]*template // by approve mode
	notebook       *template
	feedback       *template
	templatesTotal int
}

// callKind is a call template's key: what the call did, in which mode.
type callKind struct {
	kind    fillKind
	approve bool
}

// apiClient calls the server as the volume phase's people and agent.
type apiClient struct {
	base string
	http *http.Client
}

// call sends body (nil: none) as JSON with token and decodes the answer,
// which must have the status want.
func (a *apiClient) call(ctx context.Context, method, path, token string, body any, want int) (map[string]any, error) {
	return a.callWithKey(ctx, method, path, token, "", body, want)
}

// callWithKey is call with an Idempotency-Key (empty: none).
func (a *apiClient) callWithKey(ctx context.Context, method, path, token, key string, body any, want int) (map[string]any, error) {
	var rdr io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rdr)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return out, nil
}

// seedTemplates makes one call of each outcome the fill copies (in an
// auto-mode conversation, the hot one, and in an approve-mode one, the
// small one), a notebook and a feedback item through the API, and turns
// the rows each wrote into a template.
func seedTemplates(ctx context.Context, api *apiClient, pool *pgxpool.Pool, acct volumeAccount) (*seeded, error) {
	identity, err := readIdentityColumns(ctx, pool)
	if err != nil {
		return nil, err
	}
	s := &seeded{calls: map[callKind]*template{}, conversation: map[bool]*template{}}
	compile := func(name string, rows []capturedRow, optional int, refs ...uuid.UUID) (*template, error) {
		s.templatesTotal++
		return compileTemplate(name, rows, optional, refs, identity)
	}
	idOf := func(m map[string]any, field string) (uuid.UUID, error) {
		v, _ := m[field].(string)
		id, err := uuid.Parse(v)
		if err != nil {
			return uuid.Nil, fmt.Errorf("no %s in %v", field, m)
		}
		return id, nil
	}

	// The conversations: the hot one in auto mode, the small one in
	// approve mode (the default).
	for _, approve := range []bool{false, true} {
		var conv uuid.UUID
		rows, err := capture(ctx, pool, func() error {
			out, err := api.call(ctx, http.MethodPost, "/api/v1/conversations", acct.agent, map[string]any{"title": templateTitle}, http.StatusCreated)
			if err != nil {
				return err
			}
			if conv, err = idOf(out, "id"); err != nil {
				return err
			}
			if !approve {
				_, err = api.call(ctx, http.MethodPatch, "/api/v1/conversations/"+conv.String(), acct.ownerToken, map[string]any{"permission_mode": "auto"}, http.StatusOK)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("seed a conversation: %w", err)
		}
		if s.conversation[approve], err = compile(fmt.Sprintf("conversation (approve mode: %t)", approve), rows, len(rows)); err != nil {
			return nil, err
		}
		if approve {
			s.small = conv
		} else {
			s.hot = conv
		}
	}
	rows, err := capture(ctx, pool, func() error {
		_, err := api.call(ctx, http.MethodPost, "/api/v1/notebooks", acct.agent, map[string]any{"title": templateTitle}, http.StatusCreated)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seed a notebook: %w", err)
	}
	if s.notebook, err = compile("notebook", rows, len(rows)); err != nil {
		return nil, err
	}

	put := map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "customers", "key": templateKey,
		"value": map[string]any{"name": "Acme Ltd", "tier": "gold", "note": templateRationale}}, "rationale": templateRationale}
	get := map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "customers", "key": templateKey}, "rationale": templateRationale}
	refused := map[string]any{"tool": "webhook.post", "arguments": map[string]any{"url": "https://hooks.example.com/volume", "payload": map[string]any{"event": "order.shipped"}},
		"rationale": templateRationale}
	email := map[string]any{"tool": "email.send", "arguments": map[string]any{"to": "buyer@customer.example", "subject": "Your quote",
		"body": "Please find the quote we discussed attached; it is valid for thirty days."}, "rationale": templateRationale}
	n := 0
	for _, approve := range []bool{false, true} {
		conv := s.hot
		if approve {
			conv = s.small
		}
		calls := "/api/v1/conversations/" + conv.String() + "/tool-calls"
		// Each step runs one call (and what a person then does with it)
		// and, for the calls a judgment may follow, records one.
		type step struct {
			kind  fillKind
			run   func() (proposal uuid.UUID, err error)
			judge string // the token that records a judgment of it; empty: none
			class string
		}
		propose := func(body map[string]any, want int) (uuid.UUID, map[string]any, error) {
			key := ""
			if body["tool"] == "webhook.post" || body["tool"] == "email.send" { // their contracts require a key
				n++
				key = fmt.Sprintf("volume-seed-%08d-%s", n, runID)
			}
			out, err := api.callWithKey(ctx, http.MethodPost, calls, acct.agent, key, body, want)
			if err != nil {
				return uuid.Nil, nil, err
			}
			id, _ := idOf(out, "proposal_id") // none for a refused call
			return id, out, nil
		}
		just := func(kind fillKind, body map[string]any, want int) step {
			return step{kind: kind, run: func() (uuid.UUID, error) { id, _, err := propose(body, want); return id, err }}
		}
		approvePacket := func() (uuid.UUID, error) {
			id, out, err := propose(email, http.StatusAccepted)
			if err != nil {
				return id, err
			}
			packet, err := idOf(out, "approval_id")
			if err != nil {
				return id, err
			}
			_, err = api.call(ctx, http.MethodPost, "/admin/approvals/"+packet.String()+"/approve", acct.adminToken, map[string]any{}, http.StatusOK)
			return id, err
		}
		confirmPut := func() (uuid.UUID, error) {
			id, _, err := propose(put, http.StatusAccepted)
			if err == nil {
				_, err = api.call(ctx, http.MethodPost, "/api/v1/proposals/"+id.String()+"/apply", acct.ownerToken, nil, http.StatusOK)
			}
			return id, err
		}
		approved := step{kind: kindPacketApproved, run: approvePacket, judge: acct.agent, class: "email.send.external"}
		steps := []step{ // auto mode; the read reads what the change wrote
			{kind: kindWrite, run: just(kindWrite, put, http.StatusOK).run, judge: acct.agent, class: "tool.call.local"},
			just(kindRead, get, http.StatusOK),
			just(kindRefused, refused, http.StatusForbidden),
			just(kindPacketPending, email, http.StatusAccepted),
			approved,
		}
		if approve {
			steps = []step{
				just(kindRead, get, http.StatusOK),
				just(kindCard, put, http.StatusAccepted),
				{kind: kindWrite, run: confirmPut, judge: acct.ownerToken, class: "tool.call.local"},
				just(kindPacketPending, email, http.StatusAccepted),
				approved,
			}
		}
		for _, st := range steps {
			var proposal uuid.UUID
			rows, err := capture(ctx, pool, func() error {
				var err error
				proposal, err = st.run()
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("seed a %s call: %w", st.kind, err)
			}
			optional := len(rows)
			if st.judge != "" {
				judged, err := capture(ctx, pool, func() error {
					_, err := api.call(ctx, http.MethodPost, "/api/v1/evidence", st.judge, map[string]any{"action_class": st.class, "label": "approved",
						"proposal_id": proposal.String(), "note": templateRationale}, http.StatusCreated)
					return err
				})
				if err != nil {
					return nil, fmt.Errorf("seed a judgment of a %s call: %w", st.kind, err)
				}
				rows = append(rows, judged...)
			}
			key := callKind{st.kind, approve}
			if s.calls[key], err = compile(fmt.Sprintf("%s call (approve mode: %t)", st.kind, approve), rows, optional, conv); err != nil {
				return nil, err
			}
			if st.kind == kindWrite && !approve {
				s.call = proposal
			}
		}
	}
	rows, err = capture(ctx, pool, func() error {
		_, err := api.call(ctx, http.MethodPost, "/api/v1/feedback", acct.agent, map[string]any{"attempted_action": "Notify the shipping hook",
			"expected_outcome": "The hook gets the event", "actual_outcome": "Refused: the host is not on the allowlist", "tool_called": "webhook.post",
			"severity": "med", "rationale": templateRationale}, http.StatusCreated)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seed feedback: %w", err)
	}
	if s.feedback, err = compile("feedback", rows, len(rows)); err != nil {
		return nil, err
	}
	if err := pool.QueryRow(ctx, "SELECT workspace_id FROM conversations WHERE id = $1", s.hot).Scan(&s.workspace); err != nil {
		return nil, err
	}
	return s, waitForChain(ctx, pool, s.workspace)
}

// waitForChain waits until the server's sequencer has chained every
// receipt of the workspace, so the fill continues the chain from its head.
func waitForChain(ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM receipt_rows WHERE workspace_id = $1 AND seq IS NULL", ws).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d receipts still wait for the sequencer after a minute", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
