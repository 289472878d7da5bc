package main

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/chat"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/policyfile"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/telemetry"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// serverGCPercent is the server's GOGC unless the environment sets one.
const serverGCPercent = 400

func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// serve runs the server until ctx ends, then drains requests and stops the
// embedded database if it started it.
func serve(ctx context.Context, cfg Config, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel)
	if cfg.Getenv("GOGC") == "" {
		// A call allocates a few dozen short-lived objects and the live
		// heap is small (tens of MiB), so collecting at 5× the live heap
		// instead of 2× spends a quarter of the CPU on marking for a few
		// more MiB of memory. GOGC, when set, wins.
		debug.SetGCPercent(serverGCPercent)
	}
	// A tool whose contract does not hold stops the server before anything
	// else starts; the error names the tool.
	var opts []tools.Option
	var mailer tools.Mailer
	if cfg.SMTPAddr != "" {
		mailer = tools.SMTPMailer{Addr: cfg.SMTPAddr, From: cfg.SMTPFrom, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword}
		opts = append(opts, tools.WithMailer(mailer))
		log.Info("email.send delivers over SMTP", "addr", cfg.SMTPAddr, "from", cfg.SMTPFrom)
	}
	registry, err := tools.Builtin(opts...)
	if err != nil {
		return err
	}
	receiptKey, err := loadReceiptKey(cfg.ReceiptKeyFile, log)
	if err != nil {
		return err
	}
	// A bad policy file stops the server too, naming the line (a reload
	// keeps the last good one instead: internal/policyfile).
	var policyFile *tools.PolicyFile
	var policyBytes []byte
	if cfg.PolicyFile != "" {
		if policyFile, policyBytes, err = policyfile.Read(cfg.PolicyFile, registry, cfg.Getenv); err != nil {
			return err
		}
		// The built-in tools' overrides and the caller tools, checked as
		// declarations; the upstreams' tools join as they are listed.
		if err = registry.ReplacePolicy(policyFile, nil); err != nil {
			return err
		}
	}
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

	// The audit log's partitions ahead, for the retentions the tools
	// declare (they come and go with the upstreams), and its time filter's
	// map.
	stopAudit := audit.StartMaintenance(ctx, pool, log, func() []time.Duration {
		var keep []time.Duration
		for _, t := range registry.List() {
			keep = append(keep, t.Contract.Retention)
		}
		return keep
	})
	defer stopAudit()

	svc := web.NewServices(pool, log, auth.DefaultPasswordParams, registry)
	svc.Proposals.SetIdempotencyLease(cfg.IdempotencyLease)
	svc.Proposals.SetGroupCommit(cfg.GroupCommit)
	authSvc := svc.Auth
	wsID, err := authSvc.EnsureDefaultWorkspace(ctx)
	if err != nil {
		return err
	}
	generated, err := authSvc.EnsureAdmin(ctx, wsID, cfg.AdminEmail, cfg.AdminPassword)
	if err != nil {
		return err
	}
	// The upstreams' tools join the registry as they are listed; one that
	// cannot be reached now is shown unavailable and listed again on an
	// admin's refresh.
	upstreams, err := mcp.NewUpstreams(pool, registry, policyFile, wsID, log, "")
	if err != nil {
		return err
	}
	defer upstreams.Close()
	if policyFile != nil {
		upstreams.Refresh(ctx)
		log.Info("upstream MCP servers", "policy_file", cfg.PolicyFile, "upstreams", len(policyFile.Upstreams), "tools", len(registry.List()))
	}
	svc.Upstreams = upstreams
	// The effective policy's version (the registry's hash) is audited and
	// receipted when it changes: at start against the last one recorded,
	// and when an upstream's tools are listed again.
	recordPolicy := func() {
		if _, err := svc.Proposals.RecordPolicyVersion(ctx, wsID); err != nil && ctx.Err() == nil {
			log.Warn("recording the policy version", "err", err)
		}
	}
	recordPolicy()
	registry.OnChange(func() { go recordPolicy() })

	// The file's workspace settings: the pinned ones written, the others
	// when the file introduces or changes them (a file without settings
	// pins nothing).
	var fileSettings tools.FileSettings
	if policyFile != nil {
		fileSettings = policyFile.Settings
	}
	if err := svc.Settings.ApplyFile(ctx, fileSettings); err != nil {
		return err
	}
	// The policy file is reloaded on SIGHUP and when it changes; each
	// instance reports what it has in force (policy_instances) for /admin.
	loader := policyfile.New(policyfile.Config{Path: cfg.PolicyFile, Getenv: cfg.Getenv, Registry: registry, Upstreams: upstreams,
		Settings: svc.Settings, Pool: pool, Log: log}, policyFile, policyBytes)
	svc.Policy = loader
	loaderCtx, stopLoader := context.WithCancel(ctx)
	loaderDone := make(chan struct{})
	go func() { defer close(loaderDone); loader.Run(loaderCtx) }()
	defer func() { stopLoader(); <-loaderDone }()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-loaderCtx.Done():
				return
			case <-hup:
				_ = loader.Reload(loaderCtx, "SIGHUP") // logged, and shown on /admin
			}
		}
	}()

	if cfg.LLM.Model != "" {
		log.Info("chat with a model", "llm", cfg.LLM)
	}
	tel, err := telemetry.Setup(ctx, telemetry.Config{Getenv: cfg.Getenv, Version: buildVersion(), AuditJSONL: cfg.Getenv("GATEHOUSE_AUDIT_JSONL")})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("flushing telemetry", "err", err)
		}
	}()
	if telemetry.Enabled(cfg.Getenv) {
		log.Info("exporting tool calls and the audit log over OTLP")
	}
	srv, err := web.New(web.Config{Telemetry: tel, CookieSecure: cfg.CookieSecure, TrustedProxies: cfg.TrustedProxies, ReceiptKey: receiptKey, MCPAllowedOrigins: cfg.MCPAllowedOrigins,
		Mailer: mailer, PublicURL: cmp.Or(cfg.PublicURL, "http://"+cfg.Addr), IssuerURL: cfg.PublicURL,
		Chat: chat.Config{BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model, Models: cfg.LLM.Models}}, log, pool, svc)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if cfg.PprofAddr != "" {
		stopPprof, err := startPprof(cfg.PprofAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPprof()
	}
	url := "http://" + ln.Addr().String()
	if generated != "" && cfg.AdminPassword == "" {
		// Shown once, on the terminal only: it is stored only as a hash.
		fmt.Fprintf(stderr, "\nFirst start: created the admin %s with the password\n\n    %s\n\nIt is shown only this once. Sign in at %s/signin\n\n", cfg.AdminEmail, generated, url)
	}
	log.Info("listening", "url", url, "signin", url+"/signin", "admin_email", cfg.AdminEmail, "embedded_postgres", database.embedded != nil)

	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Live streams (server-sent events) end when shutdown starts, so they
	// do not hold the drain open until its timeout.
	hs.RegisterOnShutdown(srv.Close)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	return nil
}

// loadReceiptKey reads the checkpoint signing key, or generates it on first
// start (mode 0600). A file that holds no Ed25519 key stops the server with
// an error naming it. The key itself is never logged.
func loadReceiptKey(path string, log *slog.Logger) (ed25519.PrivateKey, error) {
	key, created, err := receipts.LoadOrCreateKey(path)
	if err != nil {
		return nil, err
	}
	id := receipts.NewSigner(key).KeyID()
	if created {
		log.Info("generated the receipt signing key; keep it (and back it up) outside the database", "path", path, "key_id", id)
	} else {
		log.Info("receipt signing key", "path", path, "key_id", id)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the receipt signing key is readable by others than its owner; chmod 600 it", "path", path, "mode", fi.Mode().Perm().String())
	}
	return key, nil
}

// buildVersion is the module's version as the build recorded it ("dev"
// for a build from a work tree).
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
