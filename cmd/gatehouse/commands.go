package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// withPool opens the database, migrates it and hands a pool to fn.
func withPool(ctx context.Context, cfg Config, stderr io.Writer, fn func(*pgxpool.Pool, *slog.Logger) error) error {
	log := newLogger(stderr, slog.LevelWarn)
	database, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer database.Close(log)
	pool, err := openMigratedPool(ctx, database.URL, cfg.DBMaxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(pool, log)
}

// withAuth opens the database, migrates it and hands an auth service to fn.
func withAuth(ctx context.Context, cfg Config, stderr io.Writer, fn func(*auth.Service, *slog.Logger) error) error {
	return withPool(ctx, cfg, stderr, func(pool *pgxpool.Pool, log *slog.Logger) error {
		return fn(auth.NewService(pool, auth.DefaultPasswordParams), log)
	})
}

// auditCommand is "audit purge": delete the audit rows whose retention
// (set per row from the tool's contract) has passed.
func auditCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "purge" {
		return usageError("audit needs purge")
	}
	cfg, err := loadConfig("audit purge", args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	return withPool(ctx, cfg, stderr, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		n, err := audit.Purge(ctx, db.New(pool), time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "purged %d audit rows past their retention\n", n)
		return nil
	})
}

func migrateCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("migrate needs up, down or version")
	}
	action := args[0]
	if action != "up" && action != "down" && action != "version" {
		return usageError(fmt.Sprintf("migrate %s: want up, down or version", action))
	}
	cfg, err := loadConfig("migrate "+action, args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr, slog.LevelWarn)
	database, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer database.Close(log)
	m, err := db.NewMigrator(database.URL)
	if err != nil {
		return err
	}
	defer m.Close()
	switch action {
	case "up":
		err = m.Up()
	case "down":
		err = m.Down()
	}
	if err != nil {
		return err
	}
	v, dirty, err := m.Version()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d", v)
	if dirty {
		fmt.Fprint(stdout, " (dirty: a migration failed half-way; fix the database, then force the version)")
	}
	fmt.Fprintln(stdout)
	return nil
}

func userCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "role" {
		return userRoleCommand(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "create" {
		return usageError("user needs create or role")
	}
	var email, role string
	cfg, err := loadConfig("user create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user's email")
		fs.StringVar(&role, "role", "member", "member, approver or admin")
	})
	if err != nil {
		return err
	}
	if email == "" {
		return usageError("user create needs --email")
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		return usageError("--role must be member, approver or admin")
	}
	password, err := readPassword(stdin, stderr)
	if err != nil {
		return err
	}
	return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
		ws, err := a.EnsureDefaultWorkspace(ctx)
		if err != nil {
			return err
		}
		id, err := a.CreateUser(ctx, ws, email, password, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s user %s (%s)\n", r, strings.ToLower(email), id)
		return nil
	})
}

// userRoleCommand is "user role grant|revoke|list": the named approver
// roles (finance-approver…) that members of the default workspace hold.
// The command line acts as the workspace's system, and is audited so.
func userRoleCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "grant" && args[0] != "revoke" && args[0] != "list") {
		return usageError("user role needs grant, revoke or list")
	}
	action := args[0]
	var email, role string
	cfg, err := loadConfig("user role "+action, args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		if action != "list" {
			fs.StringVar(&email, "email", "", "the member's email")
			fs.StringVar(&role, "role", "", "the named approver role, such as finance-approver")
		}
	})
	if err != nil {
		return err
	}
	if action != "list" {
		if email == "" || role == "" {
			return usageError("user role " + action + " needs --email and --role")
		}
		if email, err = auth.NormalizeEmail(email); err != nil {
			return usageError("--email must be an email address")
		}
		if role, err = auth.ParseApproverRole(role); err != nil {
			return usageError("--role " + fieldMessage(err, "role"))
		}
	}
	return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
		ws, err := a.EnsureDefaultWorkspace(ctx)
		if err != nil {
			return err
		}
		switch action {
		case "grant":
			if err := a.GrantApproverRole(ctx, auth.System(ws), email, role); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "granted %s to %s\n", role, email)
		case "revoke":
			if err := a.RevokeApproverRole(ctx, auth.System(ws), email, role); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked %s from %s\n", role, email)
		default:
			holders, err := a.ApproverRoles(ctx, ws)
			if err != nil {
				return err
			}
			for _, h := range holders {
				fmt.Fprintf(stdout, "%s\t%s\n", h.Role, h.Email)
			}
		}
		return nil
	})
}

// fieldMessage is what a validation error says about one field.
func fieldMessage(err error, field string) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		for _, f := range ae.Fields {
			if f.Field == field {
				return f.Message
			}
		}
	}
	return apperr.Message(err)
}

// readPassword reads one line from stdin; on a terminal it prompts and
// does not echo.
func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, "Password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		return string(b), nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usageError("the password is read from stdin, and stdin was empty")
	}
	return line, nil
}

func tokenCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke") {
		return usageError("token needs create or revoke")
	}
	if args[0] == "revoke" {
		var id string
		cfg, err := loadConfig("token revoke", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&id, "id", "", "the token's id (GET /api/v1/me shows it)")
		})
		if err != nil {
			return err
		}
		tid, err := uuid.Parse(id)
		if err != nil {
			return usageError("token revoke needs --id with a token id")
		}
		return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
			if err := a.RevokeToken(ctx, tid); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked %s\n", tid)
			return nil
		})
	}
	var email, kind, name string
	var connector bool
	cfg, err := loadConfig("token create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the owner's email")
		fs.StringVar(&kind, "kind", "agent", "agent (acts for an agent on the owner's behalf) or user (acts as the owner)")
		fs.StringVar(&name, "name", "", "a name for the agent or script")
		fs.BoolVar(&connector, "connector", false, "a user token for a connector (a mail client, a calendar): its evidence weighs as a connector's (0.3), not the principal's")
	})
	if err != nil {
		return err
	}
	if email == "" || name == "" {
		return usageError("token create needs --email and --name")
	}
	if connector && kind != string(auth.TokenUser) {
		return usageError("token create --connector makes a user token: pass --kind user (an agent's evidence is never upgraded)")
	}
	return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
		create := func() (string, error) { return a.CreateToken(ctx, email, auth.TokenKind(kind), name) }
		if connector {
			create = func() (string, error) { return a.CreateConnectorToken(ctx, email, name) }
		}
		token, err := create()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, token)
		return nil
	})
}

func dbCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "url" {
		return usageError("db needs url")
	}
	cfg, err := loadConfig("db url", args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr, slog.LevelWarn)
	database, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	// Leave the embedded cluster running for whoever uses the URL; the next
	// gatehouse process to finish with it stops it.
	if database.embedded != nil {
		database.embedded.Detach()
	}
	fmt.Fprintln(stdout, database.URL)
	return nil
}
