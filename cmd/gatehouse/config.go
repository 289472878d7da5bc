package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"time"
)

// Config is every setting of the process, from the environment and flags
// (flags win).
type Config struct {
	Addr          string
	DataDir       string
	DatabaseURL   string
	AdminEmail    string
	AdminPassword string
	CookieSecure  bool
	LogLevel      slog.Level
	// ShutdownTimeout bounds the graceful drain of in-flight requests.
	ShutdownTimeout time.Duration
	// SMTP delivers email.send's messages when SMTPAddr is set; otherwise
	// they are held in the workspace outbox.
	SMTPAddr, SMTPFrom, SMTPUsername, SMTPPassword string
}

// loadConfig reads the environment, then the command's flags.
func loadConfig(name string, args []string, getenv func(string) string, stderr io.Writer, extra ...func(*flag.FlagSet)) (Config, error) {
	cfg := Config{
		Addr:            envOr(getenv, "GATEHOUSE_ADDR", "127.0.0.1:8080"),
		DataDir:         envOr(getenv, "GATEHOUSE_DATA_DIR", "./var"),
		DatabaseURL:     getenv("DATABASE_URL"),
		AdminEmail:      envOr(getenv, "GATEHOUSE_ADMIN_EMAIL", "admin@localhost"),
		AdminPassword:   getenv("GATEHOUSE_ADMIN_PASSWORD"),
		CookieSecure:    true,
		ShutdownTimeout: 15 * time.Second,
		SMTPAddr:        getenv("GATEHOUSE_SMTP_ADDR"),
		SMTPFrom:        getenv("GATEHOUSE_SMTP_FROM"),
		SMTPUsername:    getenv("GATEHOUSE_SMTP_USERNAME"),
		SMTPPassword:    getenv("GATEHOUSE_SMTP_PASSWORD"),
	}
	if cfg.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.SMTPAddr); err != nil {
			return cfg, usageError("GATEHOUSE_SMTP_ADDR must be host:port")
		}
		if _, err := mail.ParseAddress(cfg.SMTPFrom); err != nil {
			return cfg, usageError("GATEHOUSE_SMTP_FROM must be the sender's address when GATEHOUSE_SMTP_ADDR is set")
		}
	}
	if v := getenv("GATEHOUSE_COOKIE_SECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, usageError("GATEHOUSE_COOKIE_SECURE must be true or false")
		}
		cfg.CookieSecure = b
	}
	if v := getenv("GATEHOUSE_LOG_LEVEL"); v != "" {
		if err := cfg.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return cfg, usageError("GATEHOUSE_LOG_LEVEL must be debug, info, warn or error")
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (the embedded PostgreSQL lives in <data-dir>/postgres)")
	if name == "serve" {
		fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on")
	}
	for _, f := range extra {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		return cfg, usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return cfg, usageError(fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if name == "serve" {
		if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
			return cfg, usageError(fmt.Sprintf("--addr %q is not host:port", cfg.Addr))
		}
	}
	return cfg, nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
