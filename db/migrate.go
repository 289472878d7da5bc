package db

import (
	"errors"
	"fmt"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/gatehouse/gatehouse/migrations"
)

// Migrator applies the embedded migrations to one database. Several
// instances may migrate at once: golang-migrate holds an advisory lock.
type Migrator struct{ m *migrate.Migrate }

// NewMigrator opens a migrator for a postgres:// (or postgresql://) URL.
func NewMigrator(databaseURL string) (*Migrator, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("db: migrations source: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, pgx5URL(databaseURL))
	if err != nil {
		return nil, fmt.Errorf("db: open migrator: %w", redact(err, databaseURL))
	}
	return &Migrator{m: m}, nil
}

// Up applies every pending migration.
func (g *Migrator) Up() error {
	if err := g.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("db: migrate up: %w", err)
	}
	return nil
}

// Down rolls back the newest applied migration.
func (g *Migrator) Down() error {
	if err := g.m.Steps(-1); err != nil {
		return fmt.Errorf("db: migrate down: %w", err)
	}
	return nil
}

// To migrates up or down to version (a test's way back to a schema before
// a migration whatever migrations came after it).
func (g *Migrator) To(version uint) error {
	if err := g.m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("db: migrate to %d: %w", version, err)
	}
	return nil
}

// Version returns the applied version (0 when none) and whether a failed
// migration left the database dirty.
func (g *Migrator) Version() (uint, bool, error) {
	v, dirty, err := g.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("db: migrate version: %w", err)
	}
	return v, dirty, nil
}

// Close releases the migrator's connection.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	return errors.Join(srcErr, dbErr)
}

// MigrateUp is Up on a fresh migrator.
func MigrateUp(databaseURL string) error {
	g, err := NewMigrator(databaseURL)
	if err != nil {
		return err
	}
	defer g.Close()
	return g.Up()
}

func pgx5URL(u string) string {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(u, scheme) {
			return "pgx5://" + strings.TrimPrefix(u, scheme)
		}
	}
	return u
}

// redact keeps a database URL (and its password) out of an error message.
func redact(err error, databaseURL string) error {
	msg := strings.ReplaceAll(err.Error(), databaseURL, "<DATABASE_URL>")
	msg = strings.ReplaceAll(msg, pgx5URL(databaseURL), "<DATABASE_URL>")
	return errors.New(msg)
}
