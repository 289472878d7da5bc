package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestLoadConfig_TrustedProxies(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return loadConfig("serve", nil, func(k string) string {
			if k == "GATEHOUSE_TRUSTED_PROXIES" {
				return v
			}
			return ""
		}, io.Discard)
	}
	cfg, err := load("")
	if err != nil || len(cfg.TrustedProxies) != 0 {
		t.Fatalf("unset: %v %v, want no trusted proxy", cfg.TrustedProxies, err)
	}
	for v, want := range map[string][]string{
		"127.0.0.1/32":                          {"127.0.0.1/32"},
		"10.0.0.7":                              {"10.0.0.7/32"},
		" 10.0.0.0/8 , 192.0.2.7,2001:db8::/32": {"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"},
		"10.1.2.3/8":                            {"10.0.0.0/8"},
		"::ffff:10.0.0.1":                       {"10.0.0.1/32"},
		"2001:db8::1":                           {"2001:db8::1/128"},
	} {
		cfg, err := load(v)
		if err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		var got []string
		for _, p := range cfg.TrustedProxies {
			got = append(got, p.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q = %v, want %v", v, got, want)
		}
	}
	for _, v := range []string{"proxy.example", "10.0.0.0/33", "10.0.0.1:80", "fe80::1%eth0", ",", "10.0.0.1,nope", "*"} {
		_, err := load(v)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "GATEHOUSE_TRUSTED_PROXIES") {
			t.Errorf("%q: %v, want a usage error naming GATEHOUSE_TRUSTED_PROXIES", v, err)
		}
	}
}

func TestLoadConfig_PprofAddrIsLoopbackOnly(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return loadConfig("serve", nil, func(k string) string {
			if k == "GATEHOUSE_PPROF_ADDR" {
				return v
			}
			return ""
		}, io.Discard)
	}
	if cfg, err := load(""); err != nil || cfg.PprofAddr != "" {
		t.Fatalf("unset: %q %v, want off", cfg.PprofAddr, err)
	}
	for _, v := range []string{"127.0.0.1:6060", "127.0.0.2:0", "[::1]:6060", "[::ffff:127.0.0.1]:6060"} {
		if cfg, err := load(v); err != nil || cfg.PprofAddr != v {
			t.Errorf("%q: %q %v, want accepted", v, cfg.PprofAddr, err)
		}
	}
	for _, v := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "192.0.2.7:6060", "localhost:6060", "pprof.example:6060",
		"127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "[fe80::1%lo]:6060"} {
		_, err := load(v)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "GATEHOUSE_PPROF_ADDR") {
			t.Errorf("%q: %v, want a usage error naming GATEHOUSE_PPROF_ADDR", v, err)
		}
	}
}

// A bad policy file stops serve before anything starts, naming the line.
func TestServe_ABadPolicyFileStopsItNamingTheLine(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/gatehouse.yaml"
	if err := os.WriteFile(path, []byte("upstreams:\n  - name: files\n    url: http://127.0.0.1:9/mcp\n    timeout: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GATEHOUSE_POLICY_FILE": path, "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "GATEHOUSE_DATA_DIR": t.TempDir()}
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("serve with a bad policy file: %v", err)
	}
}

func TestLoadConfig_GroupCommit(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return loadConfig("serve", nil, func(k string) string {
			if k == "GATEHOUSE_GROUP_COMMIT" {
				return v
			}
			return ""
		}, io.Discard)
	}
	cfg, err := load("")
	if err != nil || cfg.GroupCommit < 1 {
		t.Fatalf("unset: %d %v, want on (one writer per core)", cfg.GroupCommit, err)
	}
	for v, want := range map[string]int{"0": 0, "1": 1, "4": 4, "64": 64} {
		if cfg, err := load(v); err != nil || cfg.GroupCommit != want {
			t.Errorf("%q = %d %v, want %d", v, cfg.GroupCommit, err, want)
		}
	}
	for _, v := range []string{"-1", "65", "off", "2.5", " "} {
		_, err := load(v)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "GATEHOUSE_GROUP_COMMIT") {
			t.Errorf("%q: %v, want a usage error naming GATEHOUSE_GROUP_COMMIT", v, err)
		}
	}
}

func TestLoadConfig_MCPAllowedOrigins(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return loadConfig("serve", nil, func(k string) string {
			if k == "GATEHOUSE_MCP_ALLOWED_ORIGINS" {
				return v
			}
			return ""
		}, io.Discard)
	}
	if cfg, err := load(""); err != nil || len(cfg.MCPAllowedOrigins) != 0 {
		t.Fatalf("unset: %v %v, want none", cfg.MCPAllowedOrigins, err)
	}
	for v, want := range map[string][]string{
		"https://gatehouse.example.com":                               {"https://gatehouse.example.com"},
		" HTTPS://Gatehouse.Example.com:443/ , http://localhost:6274": {"https://gatehouse.example.com", "http://localhost:6274"},
		"http://127.0.0.1:80,http://127.0.0.1":                        {"http://127.0.0.1"},
		"https://[::1]:8443,":                                         {"https://[::1]:8443"},
	} {
		cfg, err := load(v)
		if err != nil || !slices.Equal(cfg.MCPAllowedOrigins, want) {
			t.Errorf("%q = %v %v, want %v", v, cfg.MCPAllowedOrigins, err, want)
		}
	}
	for _, v := range []string{"*", "null", "gatehouse.example.com", "https://gatehouse.example.com/mcp", "https://*.example.com",
		"ftp://files.example", "https://user:pw@gatehouse.example.com", "https://a.example,nope", ",", "https://a.example?x=1"} {
		_, err := load(v)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "GATEHOUSE_MCP_ALLOWED_ORIGINS") {
			t.Errorf("%q: %v, want a usage error naming GATEHOUSE_MCP_ALLOWED_ORIGINS", v, err)
		}
	}
}

// The allowed origins reach the running server's /mcp: a listed origin
// gets as far as the token check (401), any other is refused first (403).
func TestServe_MCPAllowedOriginsReachTheGateway(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{
		"DATABASE_URL":                  dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_PASSWORD":      "the admin's password",
		"GATEHOUSE_MCP_ALLOWED_ORIGINS": "https://inspector.example",
	})
	post := func(origin string) int {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for origin, want := range map[string]int{
		"https://inspector.example": http.StatusUnauthorized,
		"":                          http.StatusUnauthorized,
		s.URL:                       http.StatusUnauthorized,
		"https://evil.example":      http.StatusForbidden,
	} {
		if got := post(origin); got != want {
			t.Errorf("Origin %q: %d, want %d", origin, got, want)
		}
	}
}
