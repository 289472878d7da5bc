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
	"text/tabwriter"
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

// auditCommand is "audit purge": drop the audit partitions whose period of
// expiry is over, so that every row in them is past its retention (set
// per row from the tool's contract); it says how many rows went, and in
// how many partitions.
func auditCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "purge" {
		return usageError("audit needs purge")
	}
	cfg, err := loadConfig("audit purge", args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	return withPool(ctx, cfg, stderr, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		p, err := audit.Purge(ctx, pool, time.Now())
		if err != nil {
			return err
		}
		partitions := "partitions"
		if p.Partitions == 1 {
			partitions = "partition"
		}
		fmt.Fprintf(stdout, "purged %d audit rows past their retention (%d %s dropped)\n", p.Rows, p.Partitions, partitions)
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
	if len(args) > 0 && args[0] == "list" {
		return userListCommand(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "reset-password" {
		return userResetPasswordCommand(ctx, args[1:], getenv, stdin, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "create" {
		return usageError("user needs create, list, reset-password or role")
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

// userListCommand is "user list": every member of the default workspace,
// their role and the named approver roles they hold.
func userListCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig("user list", args, getenv, stderr)
	if err != nil {
		return err
	}
	return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
		ws, err := a.EnsureDefaultWorkspace(ctx)
		if err != nil {
			return err
		}
		members, err := a.Members(ctx, ws)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tROLE\tAPPROVER ROLES")
		for _, m := range members {
			roles := strings.Join(m.ApproverRoles, ",")
			if roles == "" {
				roles = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Email, m.Role, roles)
		}
		return tw.Flush()
	})
}

// userResetPasswordCommand is "user reset-password --email E": a new
// password read from stdin (as user create reads it). Every browser
// session the user signed in before it ends; their API tokens stay.
func userResetPasswordCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var email string
	cfg, err := loadConfig("user reset-password", args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user's email")
	})
	if err != nil {
		return err
	}
	if email == "" {
		return usageError("user reset-password needs --email")
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
		if err := a.SetPassword(ctx, ws, email, password); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "reset the password of %s; their browser sessions have ended\n", strings.ToLower(strings.TrimSpace(email)))
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
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke" && args[0] != "list") {
		return usageError("token needs create, list or revoke")
	}
	if args[0] == "list" {
		return tokenListCommand(ctx, args[1:], getenv, stdout, stderr)
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
	var email, kind, name, expires, toolList string
	var connector, readOnly bool
	cfg, err := loadConfig("token create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&expires, "expires", "", "the last day (YYYY-MM-DD, UTC) the token works; empty: it never expires")
		fs.StringVar(&toolList, "tools", "", "the only tools the token may call, comma-separated; empty: every tool")
		fs.BoolVar(&readOnly, "read-only", false, "the token may call only tools that read")
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
	nt := auth.NewToken{Kind: auth.TokenKind(kind), Name: name, ReadOnly: readOnly}
	if expires != "" {
		day, err := time.Parse(time.DateOnly, expires)
		if err != nil {
			return usageError("--expires must be a date (YYYY-MM-DD)")
		}
		end := day.AddDate(0, 0, 1) // it works through that day
		nt.ExpiresAt = &end
	}
	if toolList != "" {
		nt.Tools = strings.Split(toolList, ",")
	}
	return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
		token, err := a.CreateTokenFor(ctx, email, nt, connector)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, token)
		return nil
	})
}

// tokenListCommand is "token list [--email E]": the tokens of the default
// workspace (of one member with --email), newest first, never their
// secrets.
func tokenListCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var email string
	cfg, err := loadConfig("token list", args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "only this member's tokens")
	})
	if err != nil {
		return err
	}
	return withAuth(ctx, cfg, stderr, func(a *auth.Service, _ *slog.Logger) error {
		ws, err := a.EnsureDefaultWorkspace(ctx)
		if err != nil {
			return err
		}
		var tokens []auth.Token
		if email != "" {
			tokens, err = a.ListTokensOf(ctx, ws, email)
		} else {
			tokens, err = a.ListTokens(ctx, auth.System(ws), true)
		}
		if err != nil {
			return err
		}
		when := func(t *time.Time) string {
			if t == nil {
				return "-"
			}
			return t.UTC().Format(time.RFC3339)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tNAME\tOWNER\tCREATED\tLAST USED\tEXPIRES\tREVOKED\tSCOPE")
		for _, t := range tokens {
			scope := "-"
			switch {
			case t.Tools != nil && t.ReadOnly:
				scope = "read-only:" + strings.Join(t.Tools, ",")
			case t.Tools != nil:
				scope = "tools:" + strings.Join(t.Tools, ",")
			case t.ReadOnly:
				scope = "read-only"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Name, t.Email,
				when(&t.CreatedAt), when(t.LastUsedAt), when(t.ExpiresAt), when(t.RevokedAt), scope)
		}
		return tw.Flush()
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
