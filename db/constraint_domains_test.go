package db_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The rules the hot tables' CHECK constraints held (migration 21) hold as
// domains: each column is of its domain, and the domain refuses what the
// constraint refused, with a check violation.
func TestConstraintDomains_RefuseWhatTheChecksRefused(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	columns := map[string]string{
		"proposals.status": "proposal_status", "proposals.effect": "tool_effect", "proposals.disposition": "disposition",
		"proposals.rationale": "rationale_text", "proposals.constraints": "jsonb_array", "audit_events.action": "audit_action",
		"audit_events.actor_kind": "actor_kind", "messages.role": "message_role", "receipts.kind": "receipt_kind",
		"receipt_links.hash": "sha256_digest", "receipt_links.seq": "chain_seq", "receipts.metadata": "jsonb_object",
	}
	for col, want := range columns {
		var got string
		err := pool.QueryRow(t.Context(), `SELECT coalesce(domain_name, data_type) FROM information_schema.columns
			WHERE table_schema = 'public' AND table_name || '.' || column_name = $1`, col).Scan(&got)
		if err != nil || got != want {
			t.Errorf("%s is of type %q (%v); want the domain %s", col, got, err, want)
		}
	}
	for _, bad := range []string{
		`SELECT 'maybe'::proposal_status`,
		`SELECT 'write-everything'::tool_authority`,
		`SELECT repeat('x', 501)::rationale_text`,
		`SELECT '{}'::jsonb::jsonb_array`,
		`SELECT 'Proposal Created'::audit_action`,
		`SELECT '\x00'::bytea::sha256_digest`,
		`SELECT 0::chain_seq`,
		`SELECT '[]'::jsonb::jsonb_object`,
		`SELECT repeat('x', 20001)::message_text`,
	} {
		_, err := pool.Exec(t.Context(), bad)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("%s: %v; want a check violation (23514)", bad, err)
		}
	}
	for _, good := range []string{`SELECT 'applied'::proposal_status`, `SELECT 'proposal.created'::audit_action`, `SELECT NULL::sha256_digest`} {
		if _, err := pool.Exec(t.Context(), good); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}
