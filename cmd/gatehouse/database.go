package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/pgembed"
)

// database is the process's database: DATABASE_URL, or the embedded cluster
// in the data directory, shared with any other gatehouse process using it.
type database struct {
	URL      string
	embedded *pgembed.Handle
}

func openDatabase(ctx context.Context, cfg Config, log *slog.Logger) (*database, error) {
	if cfg.DatabaseURL != "" {
		return &database{URL: cfg.DatabaseURL}, nil
	}
	h, err := pgembed.Acquire(ctx, pgembed.Options{DataDir: cfg.DataDir, Logger: log})
	if err != nil {
		return nil, err
	}
	return &database{URL: h.URL, embedded: h}, nil
}

// Close stops the embedded cluster when this was its last user.
func (d *database) Close(log *slog.Logger) {
	if d.embedded == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.embedded.Release(ctx); err != nil {
		log.Error("stopping embedded PostgreSQL", "err", err)
	}
}

// openMigratedPool migrates the database and opens a pool of at most
// maxConns connections on it.
func openMigratedPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	if err := db.MigrateUp(url); err != nil {
		return nil, err
	}
	pool, err := db.NewPool(ctx, url, maxConns)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}
