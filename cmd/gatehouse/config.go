package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/proposals"
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
	// DBMaxConns sizes the database pool. Calls to the outside (SMTP,
	// webhooks) never hold a connection, so it need not grow with them.
	DBMaxConns int32
	// GroupCommit is how many transactions of automatic calls write at
	// once; calls that arrive meanwhile share the next one (0: every call
	// has a transaction of its own). See internal/proposals/group.go.
	GroupCommit int
	// IdempotencyLease is how long a key whose request died in flight
	// answers 409 before a retry gets the recorded call's real state.
	IdempotencyLease time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For is believed for
	// the client's address; none by default.
	TrustedProxies []netip.Prefix
	// PprofAddr, when set, is a loopback host:port where serve exposes
	// net/http/pprof on a listener of its own; off by default.
	PprofAddr string
	// ReceiptKeyFile holds the Ed25519 key that signs receipt checkpoints,
	// outside the database (default <data-dir>/receipt-signing.key).
	ReceiptKeyFile string
	// PolicyFile is gatehouse.yaml: the MCP upstreams behind the gate ("":
	// none).
	PolicyFile string
	// PublicURL is where people reach Gatehouse: notifications' links start
	// with it ("": http://<addr>).
	PublicURL string
	// MCPAllowedOrigins are the browser origins (scheme://host[:port])
	// that may call /mcp besides the server's own loopback origin; a
	// request from another Origin gets 403. None by default.
	MCPAllowedOrigins []string
	// Getenv reads the environment (the policy file's ${NAME} headers).
	Getenv func(string) string
	// LLM is the model endpoint conversations chat with (see docs/chat.md):
	// an OpenAI-compatible base URL, its API key (never logged), the
	// default model and the models a conversation may pick. No model: no
	// chat, and the composer says so.
	LLM LLMConfig
}

// LLMConfig is the model endpoint.
type LLMConfig struct {
	BaseURL string
	APIKey  string
	Model   string
	Models  []string
}

// LogValue keeps the API key out of every log line.
func (c LLMConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", c.BaseURL), slog.String("model", c.Model), slog.Any("models", c.Models), slog.Bool("api_key_set", c.APIKey != ""))
}

// defaultDBMaxConns is pgxpool's own default (4, or the core count if
// larger) doubled: enough to keep two cores busy while some requests wait
// on the network.
func defaultDBMaxConns() int32 { return int32(max(8, 2*runtime.NumCPU())) }

// loadConfig reads the environment, then the command's flags.
func loadConfig(name string, args []string, getenv func(string) string, stderr io.Writer, extra ...func(*flag.FlagSet)) (Config, error) {
	cfg := Config{
		Addr:             envOr(getenv, "GATEHOUSE_ADDR", "127.0.0.1:8080"),
		DataDir:          envOr(getenv, "GATEHOUSE_DATA_DIR", "./var"),
		DatabaseURL:      getenv("DATABASE_URL"),
		AdminEmail:       envOr(getenv, "GATEHOUSE_ADMIN_EMAIL", "admin@localhost"),
		AdminPassword:    getenv("GATEHOUSE_ADMIN_PASSWORD"),
		CookieSecure:     true,
		ShutdownTimeout:  15 * time.Second,
		SMTPAddr:         getenv("GATEHOUSE_SMTP_ADDR"),
		SMTPFrom:         getenv("GATEHOUSE_SMTP_FROM"),
		SMTPUsername:     getenv("GATEHOUSE_SMTP_USERNAME"),
		SMTPPassword:     getenv("GATEHOUSE_SMTP_PASSWORD"),
		DBMaxConns:       defaultDBMaxConns(),
		IdempotencyLease: 60 * time.Second,
		PprofAddr:        getenv("GATEHOUSE_PPROF_ADDR"),
		PolicyFile:       getenv("GATEHOUSE_POLICY_FILE"),
		PublicURL:        strings.TrimRight(strings.TrimSpace(getenv("GATEHOUSE_PUBLIC_URL")), "/"),
		Getenv:           getenv,
	}
	if err := loadLLMConfig(&cfg.LLM, getenv); err != nil {
		return cfg, err
	}
	if u, err := url.Parse(cfg.PublicURL); cfg.PublicURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "") {
		return cfg, usageError("GATEHOUSE_PUBLIC_URL must be an http(s) URL with a host and no query, such as https://gatehouse.example.com")
	}
	if cfg.PprofAddr != "" && !isLoopbackAddr(cfg.PprofAddr) {
		return cfg, usageError("GATEHOUSE_PPROF_ADDR must be a loopback IP address and port, such as 127.0.0.1:6060 or [::1]:6060: profiles expose the process's internals")
	}
	if v := getenv("GATEHOUSE_DB_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > 1000 {
			return cfg, usageError("GATEHOUSE_DB_MAX_CONNS must be a whole number from 2 to 1000")
		}
		cfg.DBMaxConns = int32(n)
	}
	cfg.GroupCommit = proposals.DefaultGroupWriters(cfg.DBMaxConns)
	if v := getenv("GATEHOUSE_GROUP_COMMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 64 {
			return cfg, usageError("GATEHOUSE_GROUP_COMMIT must be a whole number from 0 (off) to 64")
		}
		cfg.GroupCommit = n
	}
	if v := getenv("GATEHOUSE_IDEMPOTENCY_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			return cfg, usageError("GATEHOUSE_IDEMPOTENCY_LEASE must be a duration from 1s to 1h, such as 60s")
		}
		cfg.IdempotencyLease = d
	}
	if v := getenv("GATEHOUSE_MCP_ALLOWED_ORIGINS"); v != "" {
		origins, err := parseOrigins(v)
		if err != nil {
			return cfg, usageError("GATEHOUSE_MCP_ALLOWED_ORIGINS must be a comma-separated list of origins (scheme://host[:port], no path or wildcard), such as https://gatehouse.example.com,http://localhost:6274: " + err.Error())
		}
		cfg.MCPAllowedOrigins = origins
	}
	if v := getenv("GATEHOUSE_TRUSTED_PROXIES"); v != "" {
		ps, err := parseTrustedProxies(v)
		if err != nil {
			return cfg, usageError("GATEHOUSE_TRUSTED_PROXIES must be a comma-separated list of IP addresses and CIDR ranges, such as 10.0.0.0/8,192.0.2.7: " + err.Error())
		}
		cfg.TrustedProxies = ps
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
	cfg.ReceiptKeyFile = envOr(getenv, "GATEHOUSE_RECEIPT_KEY_FILE", filepath.Join(cfg.DataDir, "receipt-signing.key"))
	if name == "serve" {
		if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
			return cfg, usageError(fmt.Sprintf("--addr %q is not host:port", cfg.Addr))
		}
	}
	return cfg, nil
}

// loadLLMConfig reads GATEHOUSE_LLM_*: a base URL must be http(s), and
// GATEHOUSE_LLM_MODELS is a comma-separated list.
func loadLLMConfig(c *LLMConfig, getenv func(string) string) error {
	c.BaseURL = strings.TrimSpace(getenv("GATEHOUSE_LLM_BASE_URL"))
	c.APIKey = getenv("GATEHOUSE_LLM_API_KEY")
	c.Model = strings.TrimSpace(getenv("GATEHOUSE_LLM_MODEL"))
	for _, m := range strings.Split(getenv("GATEHOUSE_LLM_MODELS"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.Models = append(c.Models, m)
		}
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return usageError("GATEHOUSE_LLM_BASE_URL must be an http or https URL without credentials, such as https://api.openai.com/v1 or http://localhost:11434/v1")
		}
	}
	if c.Model == "" && len(c.Models) > 0 {
		c.Model = c.Models[0]
	}
	if c.Model == "" && (c.BaseURL != "" || c.APIKey != "") {
		return usageError("GATEHOUSE_LLM_MODEL must name the default model when GATEHOUSE_LLM_BASE_URL or GATEHOUSE_LLM_API_KEY is set")
	}
	for _, m := range append([]string{c.Model}, c.Models...) {
		if len(m) > 200 {
			return usageError("GATEHOUSE_LLM_MODEL and GATEHOUSE_LLM_MODELS name models of at most 200 characters")
		}
	}
	return nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// isLoopbackAddr reports whether addr is a loopback IP address and a port,
// which only this machine can reach. A name (localhost) is refused: what it
// resolves to is not ours to trust; an empty host (":6060") listens
// everywhere.
func isLoopbackAddr(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}

// parseOrigins reads a comma-separated list of origins, each in the one
// form the Origin header is compared in (mcp.ParseOrigin).
func parseOrigins(v string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		o, err := mcp.ParseOrigin(item)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", item, err)
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no origin in %q", v)
	}
	return out, nil
}

// parseTrustedProxies reads a comma-separated list of IP addresses (each a
// range of one) and CIDR ranges.
func parseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(item, "/") {
			p, err = netip.ParsePrefix(item)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(item); err == nil && a.Zone() == "" {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || !p.IsValid() {
			return nil, fmt.Errorf("%q is not an IP address or CIDR range", item)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no address in %q", v)
	}
	return out, nil
}
