package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// server is where the phases send their calls.
type server struct {
	url   string
	pprof string // the pprof listener's /debug/pprof/ URL; empty: off
}

var (
	listeningLine = regexp.MustCompile(`"msg":"listening","url":"(http://[^"]+)"`)
	pprofLine     = regexp.MustCompile(`"msg":"pprof listening[^"]*","url":"(http://[^"]+)"`)
)

// waitForServer finds the server's URL in its log (it listens on a port
// the kernel picked) and polls /readyz until it answers 200.
func waitForServer(ctx context.Context, o options) (server, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	s := server{url: strings.TrimRight(o.url, "/")}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for s.url == "" {
		log, _ := os.ReadFile(o.serverLog)
		if m := listeningLine.FindSubmatch(log); m != nil {
			s.url = string(m[1])
			if p := pprofLine.FindSubmatch(log); p != nil {
				s.pprof = string(p[1])
			}
			break
		}
		if o.serverPID != 0 && !alive(o.serverPID) {
			return s, fmt.Errorf("the server exited before it listened; its log:\n%s", tail(log, 20))
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("the server did not say where it listens (in %s): %w", o.serverLog, ctx.Err())
		case <-tick.C:
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("%s/readyz did not answer 200: %v", s.url, ctx.Err())
		case <-tick.C:
		}
	}
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// account is the member the calls are made for: an agent token proposes,
// the owner's user token sets modes and applies.
type account struct {
	agent, owner string
	dbURL        string
}

// makeAccount creates a member and its two tokens with the gatehouse CLI,
// on the server's database (the same environment: GATEHOUSE_DATA_DIR or
// DATABASE_URL), and asks it for the database URL.
func makeAccount(ctx context.Context, gatehouse string) (account, error) {
	email := "bench-" + randomHex(4) + "@example.com"
	var a account
	if _, err := cli(ctx, gatehouse, randomHex(16)+"\n", "user", "create", "--email", email, "--role", "member"); err != nil {
		return a, err
	}
	var err error
	if a.agent, err = cli(ctx, gatehouse, "", "token", "create", "--email", email, "--kind", "agent", "--name", "bench-agent"); err != nil {
		return a, err
	}
	if a.owner, err = cli(ctx, gatehouse, "", "token", "create", "--email", email, "--kind", "user", "--name", "bench-owner"); err != nil {
		return a, err
	}
	if a.dbURL, err = cli(ctx, gatehouse, "", "db", "url"); err != nil {
		return a, err
	}
	return a, nil
}

// cli runs one gatehouse command and returns its trimmed output.
func cli(ctx context.Context, gatehouse, stdin string, args ...string) (string, error) {
	return cliEnv(ctx, gatehouse, nil, stdin, args...)
}

// cliEnv is cli in the environment env (nil: this process's).
func cliEnv(ctx context.Context, gatehouse string, env []string, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, gatehouse, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gatehouse %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// rssKiB is the process's resident set size from /proc/<pid>/status, or 0
// when it cannot be read (no pid, not Linux, the process is gone).
func rssKiB(pid int) int64 { return procStatusKiB(pid, "VmRSS:") }

// peakRSSKiB is the most the process's resident set has been since it
// started (VmHWM), or 0.
func peakRSSKiB(pid int) int64 { return procStatusKiB(pid, "VmHWM:") }

func procStatusKiB(pid int, field string) int64 {
	if pid == 0 {
		return 0
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
