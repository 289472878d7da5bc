package db

import (
	"context"

	"github.com/jackc/pgx/v5"
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

// AfterConnect teaches a new connection the Go types the queries use:
// google/uuid values encode and decode as binary uuids directly, instead
// of through database/sql's Valuer and Scanner (text, and an allocation
// per value), on every parameter of every call.
func AfterConnect(_ context.Context, conn *pgx.Conn) error {
	pgxuuid.Register(conn.TypeMap())
	return nil
}

// SearchRecordsSQL is records.search's statement, for the test that
// checks its plan uses the trigram indexes.
const SearchRecordsSQL = searchRecords
