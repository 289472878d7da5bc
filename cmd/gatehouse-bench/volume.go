package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
)

// The volume phase (BENCH_VOLUME=N): does every page and list API a
// person or a caller hits stay fast when the database holds months of
// calls? It starts a server of its own on a fresh database of the same
// cluster, seeds one call of each outcome through the API, times every
// page on that (nearly) empty database, fills it to N calls by copying
// the seeded rows (volume_fill.go), and times every page again, reading
// the server's peak memory. The write phases never see this database.

// volumeTarget is the server the phase reads and fills.
type volumeTarget struct {
	base string
	pool *pgxpool.Pool // the server's database
	acct volumeAccount
	pid  int // the server's process, for its memory; 0: not measured
	// verify is the verification step's load (clients 0: no step).
	verify verifyLoad
}

// verifyLoad is the calls the verification step makes: clients for d
// alone, then beside the run for at most limit; dbURL is the cluster's,
// for the calls' cost.
type verifyLoad struct {
	clients  int
	d, limit time.Duration
	dbURL    string
}

// measureVolume is the phase on a running server with an empty database.
func measureVolume(ctx context.Context, tgt volumeTarget, calls, samples int, out io.Writer) (*volumeResult, error) {
	res := &volumeResult{Plan: planVolume(calls)}
	began := time.Now()
	api := &apiClient{base: tgt.base, http: &http.Client{Timeout: time.Minute}}
	s, err := seedTemplates(ctx, api, tgt.pool, tgt.acct)
	if err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	res.Seeded = s.templatesTotal
	r, err := newReaders(ctx, tgt.base, tgt.acct)
	if err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	res.PeakRSSSignedIn = peakRSSKiB(tgt.pid)
	fmt.Fprintf(out, "  (volume: seeded %d actions through the API in %s; timing %d pages on the empty database)\n",
		s.templatesTotal, time.Since(began).Round(time.Millisecond), len(volumePages))
	pc, err := pageContextNow(ctx, r, tgt.pool, s, tgt.acct, time.Now())
	if err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	empty := timePages(ctx, r, pc, samples, out, "empty")
	res.PeakRSSEmpty = peakRSSKiB(tgt.pid)

	fmt.Fprintf(out, "  (volume: filling to %d calls)\n", calls)
	now := time.Now()
	res.Fill, err = fillVolume(ctx, tgt.pool, s, res.Plan, now, func(done, total int) {
		fmt.Fprintf(out, "  (volume: %d of %d events written, %s)\n", done, total, time.Since(now).Round(time.Second))
	})
	if err != nil {
		return nil, fmt.Errorf("volume: fill: %w", err)
	}
	if err := historyIsAnnounced(ctx, tgt.pool); err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	fmt.Fprintf(out, "  (volume: filled in %s, VACUUM (ANALYZE) %s; timing the pages again)\n",
		res.Fill.Took.Round(100*time.Millisecond), res.Fill.Vacuum.Round(100*time.Millisecond))
	if pc, err = pageContextNow(ctx, r, tgt.pool, s, tgt.acct, time.Now()); err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	full := timePages(ctx, r, pc, samples, out, "volume")
	res.PeakRSS = peakRSSKiB(tgt.pid)
	for i, p := range volumePages {
		res.Pages = append(res.Pages, pageResult{Name: p.Name, Route: p.Route, Empty: empty[i], Volume: full[i]})
	}
	if l := tgt.verify; l.clients > 0 {
		vr := measureVerify(ctx, tgt, l, out)
		res.Verify = &vr
		res.PeakRSS = peakRSSKiB(tgt.pid)
	}
	return res, ctx.Err()
}

// runVolumePhase starts the phase's own server on a fresh database of the
// cluster at clusterURL, measures, and removes both.
func runVolumePhase(ctx context.Context, o options, clusterURL, tmp string, out io.Writer) (*volumeResult, error) {
	fmt.Fprintf(out, "Volume phase: %d calls, on a server and database of its own\n", o.volume)
	srv, err := startVolumeServer(ctx, o.gatehouse, clusterURL, tmp)
	if err != nil {
		return nil, err
	}
	srv.keep = o.volumeKeep
	defer srv.stop(out)
	acct, err := srv.makeAccount(ctx)
	if err != nil {
		return nil, err
	}
	pool, err := db.NewPool(ctx, srv.dbURL, 4)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	res, err := measureVolume(ctx, volumeTarget{base: srv.url, pool: pool, acct: acct, pid: srv.cmd.Process.Pid,
		verify: verifyLoad{clients: o.clients, d: o.duration, limit: verifyLimit, dbURL: clusterURL}}, o.volume, pageSamples, out)
	if err != nil {
		log, _ := os.ReadFile(srv.log)
		return nil, fmt.Errorf("%w\nthe volume server's log (last lines):\n%s", err, tail(log, 20))
	}
	return res, nil
}

// volumeServer is a gatehouse server on a database created for it.
type volumeServer struct {
	cmd                 *exec.Cmd
	url                 string
	env                 []string // the server's and its CLI's
	clusterURL, dbURL   string
	database            string
	log                 string // the server's log
	adminEmail, adminPw string
	keep                bool // leave the database when stopping
}

// startVolumeServer creates a database on the cluster and starts
// `gatehouse serve` on it (it migrates the database as it starts).
func startVolumeServer(ctx context.Context, gatehouse, clusterURL, tmp string) (*volumeServer, error) {
	v := &volumeServer{clusterURL: clusterURL, database: "gatehouse_volume_" + randomHex(4),
		adminEmail: "volume-admin@example.com", adminPw: "volume-" + randomHex(12)}
	dir, err := os.MkdirTemp(tmp, "volume-")
	if err != nil {
		return nil, err
	}
	v.log = filepath.Join(dir, "server.log")
	log, err := os.Create(v.log)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	conn, err := pgx.Connect(ctx, clusterURL)
	if err != nil {
		return nil, fmt.Errorf("volume: connect to the cluster: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{v.database}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("volume: create its database (the cluster's role needs CREATEDB): %w", err)
	}
	u, err := url.Parse(clusterURL)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + v.database
	v.dbURL = u.String()
	// The server is configured as the one under test (the environment),
	// but for what is its own: its database (DATABASE_URL), a data
	// directory holding only its receipt key, its admin, no pprof
	// listener, and cookies that are not Secure (it is signed in to over
	// plain HTTP).
	own := []string{"DATABASE_URL", "GATEHOUSE_DATA_DIR", "GATEHOUSE_RECEIPT_KEY_FILE", "GATEHOUSE_ADMIN_EMAIL", "GATEHOUSE_ADMIN_PASSWORD",
		"GATEHOUSE_PPROF_ADDR", "GATEHOUSE_COOKIE_SECURE", "GATEHOUSE_ADDR"}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(own, name) {
			v.env = append(v.env, kv)
		}
	}
	v.env = append(v.env, "DATABASE_URL="+v.dbURL, "GATEHOUSE_DATA_DIR="+dir, "GATEHOUSE_ADMIN_EMAIL="+v.adminEmail,
		"GATEHOUSE_ADMIN_PASSWORD="+v.adminPw, "GATEHOUSE_COOKIE_SECURE=false")
	v.cmd = exec.Command(gatehouse, "serve", "--addr", "127.0.0.1:0")
	v.cmd.Env, v.cmd.Stdout, v.cmd.Stderr = v.env, log, log
	if err := v.cmd.Start(); err != nil {
		v.dropDatabase()
		return nil, fmt.Errorf("volume: start the server: %w", err)
	}
	s, err := waitForServer(ctx, options{serverLog: v.log, serverPID: v.cmd.Process.Pid})
	if err != nil {
		v.stop(io.Discard)
		return nil, fmt.Errorf("volume: %w", err)
	}
	v.url = s.url
	return v, nil
}

// makeAccount creates the owner (a member, with a password to sign in)
// and the tokens, with the gatehouse CLI on the server's database.
func (v *volumeServer) makeAccount(ctx context.Context) (volumeAccount, error) {
	a := volumeAccount{ownerEmail: "volume-owner@example.com", ownerPassword: "volume-" + randomHex(12),
		adminEmail: v.adminEmail, adminPassword: v.adminPw}
	gatehouse := v.cmd.Path
	if _, err := cliEnv(ctx, gatehouse, v.env, a.ownerPassword+"\n", "user", "create", "--email", a.ownerEmail, "--role", "member"); err != nil {
		return a, err
	}
	for _, t := range []struct {
		into              *string
		email, kind, name string
	}{{&a.agent, a.ownerEmail, "agent", "volume-agent"}, {&a.ownerToken, a.ownerEmail, "user", "volume-owner"}, {&a.adminToken, a.adminEmail, "user", "volume-admin"}} {
		tok, err := cliEnv(ctx, gatehouse, v.env, "", "token", "create", "--email", t.email, "--kind", t.kind, "--name", t.name)
		if err != nil {
			return a, err
		}
		*t.into = tok
	}
	return a, nil
}

// stop stops the server (SIGTERM, then SIGKILL after half a minute) and
// drops its database.
func (v *volumeServer) stop(out io.Writer) {
	if v.cmd.Process != nil {
		v.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { v.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			v.cmd.Process.Kill()
			<-done
		}
	}
	if v.keep {
		fmt.Fprintf(out, "  (volume: kept the database: %s)\n", v.dbURL)
		return
	}
	if err := v.dropDatabase(); err != nil {
		fmt.Fprintf(out, "  (volume: could not drop %s: %v)\n", v.database, err)
	}
}

func (v *volumeServer) dropDatabase() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, v.clusterURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{v.database}.Sanitize()+" WITH (FORCE)")
	return err
}

// historyIsAnnounced treats the filled history as announced and exported
// already: the notifications and audit export feeds move to the log's
// head and what they queued during the fill is dropped. Otherwise the
// server would mail approvers about 10,000 packets of the past while the
// pages are timed, which measures the mail, not the pages.
func historyIsAnnounced(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `
		WITH head AS (SELECT coalesce(max(id), 0) AS last FROM audit_events)
		UPDATE rollup_feeds SET folded_to = head.last, next_to = head.last FROM head
		WHERE feed IN ('notifications', 'audit_export') AND folded_to < head.last`)
	if err != nil {
		return fmt.Errorf("advance the notifications feed: %w", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE notifications SET status = 'dropped' WHERE status IN ('queued', 'sending')`); err != nil {
		return fmt.Errorf("drop the fill's notifications: %w", err)
	}
	return nil
}
