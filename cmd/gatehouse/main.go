// Command gatehouse is the one binary: the server and its admin commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is the exit status for run's error: 0 for none, 2 for a
// mistake in the command line, 3 for a receipt chain that does not
// verify or a policy replay in which a --fail-on kind occurred, 1 for
// anything else.
func exitCode(err error) int {
	var u usageError
	var b chainBroken
	var r replayFailed
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	case errors.As(err, &b), errors.As(err, &r):
		return 3
	}
	return 1
}

// run is the whole program, with its inputs passed in so tests can run it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError("a command is required")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		cfg, err := loadConfig("serve", rest, getenv, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stderr)
	case "migrate":
		return migrateCommand(ctx, rest, getenv, stdout, stderr)
	case "user":
		return userCommand(ctx, rest, getenv, stdin, stdout, stderr)
	case "token":
		return tokenCommand(ctx, rest, getenv, stdout, stderr)
	case "db":
		return dbCommand(ctx, rest, getenv, stdout, stderr)
	case "audit":
		return auditCommand(ctx, rest, getenv, stdout, stderr)
	case "receipts":
		return receiptsCommand(ctx, rest, getenv, stdout, stderr)
	case "policy":
		return policyCommand(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError(fmt.Sprintf("unknown command %q", cmd))
}

const usage = `Usage: gatehouse <command> [flags]

Commands:
  serve                      run the server (--addr, --data-dir)
  migrate up|down|version    apply, roll back one, or show migrations
  user create --email E --role member|approver|admin
                             add a user; the password is read from stdin
  user role grant|revoke --email E --role R
                             give or take a named approver role (finance-approver)
  user role list             print each named approver role and its holder
  user list                  print every member, their role and approver roles
  user reset-password --email E
                             set a new password (read from stdin); the user's
                             browser sessions end, their tokens stay
  token create --email E --kind agent|user --name N [--connector]
               [--expires YYYY-MM-DD] [--tools T1,T2] [--read-only]
                             print a new API token (shown once); --connector
                             (with --kind user) for a connector, whose
                             evidence weighs 0.3; --tools and --read-only
                             narrow what it may call
  token list [--email E]     print the tokens (never their secrets)
  token revoke --id ID       revoke an API token
  db url                     print the database URL (starts the embedded one if needed)
  audit purge                drop the audit partitions whose rows are all past
                             their retention
  receipts verify [--checkpoint FILE [--public-key FILE]]
                             verify every workspace's receipt chain, or prove
                             it still extends a saved checkpoint (exit 3: broken)
  policy check FILE          check a policy file (gatehouse.yaml) as the server
                             loads it: "ok", or every error with its line (exit 1)
  policy replay FILE [--since 7d] [--workspace W] [--json]
               [--fail-on KIND,...] [--examples N]
                             decide every call recorded since (a duration or
                             Nd days; every workspace, or W by id, slug or
                             name) again under FILE, writing nothing, and
                             report what would change per tool and action
                             class; --fail-on newly-asks, newly-allowed,
                             newly-allowed-destructive, newly-blocked,
                             restated or changed: exit 3 when one occurs

Every command finds its database the same way: DATABASE_URL if set,
otherwise the embedded PostgreSQL cluster in the data directory.
`

// usageError is a mistake in the command line (exit status 2).
type usageError string

func (u usageError) Error() string { return string(u) }
