package db

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// NewPool opens a pool on url with the connection settings every pool of
// Gatehouse uses (maxConns 0 keeps pgxpool's default).
func NewPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if maxConns > 0 {
		pc.MaxConns = maxConns
	}
	pc.AfterConnect = AfterConnect
	return pgxpool.NewWithConfig(ctx, pc)
}

// AfterConnect sets up a new connection: JIT off, and the Go types the
// queries use taught to it.
//
// google/uuid values encode and decode as binary uuids directly, instead
// of through database/sql's Valuer and Scanner (text, and an allocation
// per value), on every parameter of every call.
//
// json and jsonb read into a json.RawMessage take the server's text as it
// is: PostgreSQL only sends valid JSON, and checking it again with
// json.Unmarshal was work on every JSON column of every row read.
func AfterConnect(ctx context.Context, conn *pgx.Conn) error {
	tm := conn.TypeMap()
	pgxuuid.Register(tm)
	tm.RegisterType(&pgtype.Type{Name: "json", OID: pgtype.JSONOID, Codec: &pgtype.JSONCodec{Marshal: json.Marshal, Unmarshal: unmarshalJSON}})
	tm.RegisterType(&pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: &pgtype.JSONBCodec{Marshal: json.Marshal, Unmarshal: unmarshalJSON}})
	// No JIT compilation: every statement Gatehouse runs reads a bounded
	// range through an index, where compiling costs far more than it
	// saves; but a generic plan's estimate (a range of unknown size over
	// every partition of the audit log) can pass jit_above_cost, and then
	// each run compiles. Measured under records.put at 8 clients: the
	// audit hours' fold, once a second, spent 50-420 ms compiling a
	// statement that ran in under a millisecond. A SET, not a startup
	// parameter, which connection poolers such as PgBouncer refuse.
	if _, err := conn.Exec(ctx, "SET jit = off"); err != nil {
		return fmt.Errorf("db: turn off JIT: %w", err)
	}
	return nil
}

// unmarshalJSON is json.Unmarshal, except into a json.RawMessage, which
// gets a copy of the text (pgx reuses its read buffer).
func unmarshalJSON(data []byte, v any) error {
	if raw, ok := v.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	return json.Unmarshal(data, v)
}

// ListRecentReceiptsSQL is /admin/receipts' statement, for the test that
// checks its plan reads each partial index up to the limit.
const ListRecentReceiptsSQL = listRecentReceipts

// CountUnchainedReceiptsSQL is the pending count's statement, for its plan test.
const CountUnchainedReceiptsSQL = countUnchainedReceipts

// SearchRecordsSQL is records.search's statement, for the test that
// checks its plan uses the trigram indexes.
const SearchRecordsSQL = searchRecords

// SearchRecordsByKeyPrefixSQL and SearchCollectionByKeyPrefixSQL are
// records.search's statements for a query too short for a trigram, for
// the test that checks their plans stop at the limit (migration 26).
const (
	SearchRecordsByKeyPrefixSQL    = searchRecordsByKeyPrefix
	SearchCollectionByKeyPrefixSQL = searchCollectionByKeyPrefix
)

// CountWaitingCardsSQL and ListAgentOutcomesSQL are the home page's and
// the header's statements over a user's proposals, for the test that
// checks their plans use indexes (migration 25).
const (
	CountWaitingCardsSQL = countWaitingCards
	ListAgentOutcomesSQL = listAgentOutcomes
)

// ListScopeClassesSQL is the header's classes statement, for its plan test.
const ListScopeClassesSQL = listScopeClasses

// The conversations list's statements and the lines' roll-up's, for
// their plan test.
const (
	ListConversationActivitySQL = listConversationActivity
	ListConversationTailSQL     = listConversationTail
	FoldConversationCallsSQL    = foldConversationCalls
	FoldConversationMessagesSQL = foldConversationMessages
)
