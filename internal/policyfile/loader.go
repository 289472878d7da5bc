// Package policyfile keeps the policy file (gatehouse.yaml) in force on a
// running server: it loads it at start (strictly: a bad file stops the
// server), reloads it on SIGHUP and when the file changes, and puts a good
// file in force atomically: the built-in tools' overrides, the caller
// tools and the upstreams switch together, in one snapshot of the tool
// registry. A bad file keeps the last good one in force; why (with the
// line) is logged, shown on /admin, and written with the instance's
// status in PostgreSQL, so /admin shows every instance and whether they
// run the same file.
package policyfile

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/rollup"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Read reads and checks the policy file at path, as the server loads it:
// parsed (every error names its line, ${NAME} in a header read with
// getenv) and checked against the registry's declarations
// (tools.Registry.CheckPolicy), without changing anything. It returns the
// file's bytes too, for their hash.
func Read(path string, registry *tools.Registry, getenv func(string) string) (*tools.PolicyFile, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("policy file: %w", err)
	}
	f, err := tools.ParsePolicyFile(data, registry.Classes(), getenv)
	if err != nil {
		return nil, data, fmt.Errorf("policy file %s: %w", path, err)
	}
	if err := registry.CheckPolicy(f); err != nil {
		return nil, data, err
	}
	return f, data, nil
}

// Hash is the SHA-256 (hex) of a file's bytes: what instances compare to
// tell whether they run the same file.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Config is what a Loader needs.
type Config struct {
	// Path is the policy file ("" : the server runs without one, and a
	// reload has nothing to read).
	Path     string
	Getenv   func(string) string
	Registry *tools.Registry
	// Upstreams are the MCP upstreams the file declares (may be nil).
	Upstreams *mcp.Upstreams
	// Settings writes the file's settings: section to the workspaces
	// (nil: not written).
	Settings SettingsApplier
	Pool     *pgxpool.Pool
	Log      *slog.Logger
	// InstanceID names this instance in policy_instances (default: the
	// host name, the process id and a random suffix).
	InstanceID string
	// Debounce is how long the file must stay quiet after a change before
	// it is read (250 ms by default): an editor writes in several steps.
	Debounce time.Duration
	// Heartbeat is how often the instance's row is written again (30 s).
	Heartbeat time.Duration
}

// SettingsApplier writes a policy file's workspace settings
// (internal/settings): the pinned ones always, the others when the file
// introduces or changes them.
type SettingsApplier interface {
	ApplyFile(ctx context.Context, fs tools.FileSettings) error
}

// GoneAfter is how long an instance may stay silent before /admin shows
// it as gone: a few heartbeats.
const GoneAfter = 3 * time.Minute

// Loader keeps the policy file in force.
type Loader struct {
	cfg      Config
	q        *db.Queries
	hostname string

	mu sync.Mutex // one load at a time
	// st is what /admin shows (under stMu).
	stMu sync.Mutex
	st   Status
	// attempted is the hash of the bytes last read, loaded or not: a file
	// event that leaves the file as it was reloads nothing.
	attempted string
	// running is Run's context while it runs (nil before).
	running atomic.Pointer[context.Context]
}

// Status is the policy in force on this instance.
type Status struct {
	InstanceID string
	Path       string
	// FileHash is the SHA-256 of the file's bytes in force ("" : none);
	// PolicyHash the tool registry's hash (the effective policy's version).
	FileHash   string
	PolicyHash string
	LoadedAt   time.Time
	// Trigger says what loaded it: start, SIGHUP, file change.
	Trigger string
	// Error is the last reload's failure, nil once a good file is loaded.
	Error *LoadError
}

// LoadError is a file that was not put in force, and why.
type LoadError struct {
	Message string
	// Line is the line the error names (0: none, a file that cannot be
	// read, say).
	Line    int
	At      time.Time
	Trigger string
}

// New is the loader of the file at start. file and data are the file as
// serve read it (Read) and put in force; nil when there is none.
func New(cfg Config, file *tools.PolicyFile, data []byte) *Loader {
	if cfg.Debounce == 0 {
		cfg.Debounce = 250 * time.Millisecond
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	if cfg.InstanceID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Path != "" {
		if abs, err := filepath.Abs(cfg.Path); err == nil {
			cfg.Path = abs
		}
	}
	l := &Loader{cfg: cfg, hostname: host}
	if cfg.Pool != nil {
		l.q = db.New(cfg.Pool)
	}
	l.st = Status{InstanceID: cfg.InstanceID, Path: cfg.Path, LoadedAt: time.Now(), Trigger: "start"}
	if file != nil {
		l.st.FileHash = Hash(data)
		l.attempted = l.st.FileHash
	}
	// An upstream's shadow rules are declared when it is listed.
	cfg.Registry.OnChange(func() {
		if ctx := l.running.Load(); ctx != nil && (*ctx).Err() == nil {
			go l.noteShadowRules(*ctx)
		}
	})
	return l
}

// Status is the policy in force on this instance now.
func (l *Loader) Status() Status {
	if l == nil {
		return Status{}
	}
	l.stMu.Lock()
	st := l.st
	l.stMu.Unlock()
	st.PolicyHash = l.cfg.Registry.Hash()
	return st
}

// ErrNoFile is a reload of a server that runs without a policy file.
var ErrNoFile = errors.New("policy file: none is configured (GATEHOUSE_POLICY_FILE)")

// Reload reads the file again and puts it in force if it is good: the
// whole file parsed and checked first, then its settings written (one
// transaction), then the registry's declarations and the upstreams
// switched in one snapshot (mcp.Upstreams.Reconfigure with
// tools.Registry.ReplacePolicy). A file that is not good changes nothing:
// the last good one stays in force, and the error (with its line) is
// logged, kept for /admin and written to the instance's row. trigger says
// why it reloads (SIGHUP, file change). The registry's listeners
// (RecordPolicyVersion among them) are told of the new declarations.
func (l *Loader) Reload(ctx context.Context, trigger string) error {
	if l.cfg.Path == "" {
		l.cfg.Log.Warn("nothing to reload: the server runs without a policy file", "trigger", trigger)
		return ErrNoFile
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reload(ctx, trigger, false)
}

// reload is Reload with l.mu held; onlyChanged skips a file whose bytes
// are the ones last read.
func (l *Loader) reload(ctx context.Context, trigger string, onlyChanged bool) error {
	f, data, err := Read(l.cfg.Path, l.cfg.Registry, l.cfg.Getenv)
	if err == nil && len(data) == 0 {
		// What an editor that writes in place leaves for a moment (the
		// file truncated, not written yet) would clear the whole policy.
		f, err = nil, errEmpty
	}
	hash := ""
	if data != nil {
		hash = Hash(data)
	}
	if onlyChanged && data != nil && hash == l.attempted {
		return nil
	}
	l.attempted = hash
	if err == nil && l.cfg.Settings != nil {
		// Written first, in one transaction: a database that refuses them
		// leaves everything as it was, and the reload fails.
		err = l.cfg.Settings.ApplyFile(ctx, f.Settings)
	}
	var changes mcp.UpstreamChanges
	if err == nil {
		changes, err = l.cfg.Upstreams.Reconfigure(f, func(up map[string][]tools.Tool) error {
			return l.cfg.Registry.ReplacePolicy(f, up)
		})
	}
	if err != nil {
		le := &LoadError{Message: err.Error(), Line: lineOf(err), At: time.Now(), Trigger: trigger}
		l.stMu.Lock()
		l.st.Error = le
		l.stMu.Unlock()
		l.cfg.Log.Error("policy file not reloaded: the last good one stays in force", "path", l.cfg.Path, "trigger", trigger, "line", le.Line, "err", err)
		l.report(ctx)
		return err
	}
	l.stMu.Lock()
	l.st.FileHash, l.st.LoadedAt, l.st.Trigger, l.st.Error = hash, time.Now(), trigger, nil
	l.stMu.Unlock()
	l.noteShadowRules(ctx)
	l.cfg.Log.Info("policy file reloaded", "path", l.cfg.Path, "trigger", trigger, "file_hash", hash, "policy_hash", l.cfg.Registry.Hash(),
		"upstreams_added", changes.Added, "upstreams_changed", changes.Changed, "upstreams_removed", changes.Removed)
	l.report(ctx)
	return nil
}

// errEmpty is a reload that found the file empty.
var errEmpty = errors.New("policy file: the file is empty (a save still in progress?); to clear the policy, write {} or a comment")

// lineNumber finds the line an error names ("line 12: …").
var lineNumber = regexp.MustCompile(`\bline (\d+)\b`)

func lineOf(err error) int {
	if m := lineNumber.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// report writes the instance's row (policy_instances). A database that
// does not answer is logged: the policy in force does not depend on it.
func (l *Loader) report(ctx context.Context) {
	if l.q == nil {
		return
	}
	st := l.Status()
	p := db.UpsertPolicyInstanceParams{InstanceID: st.InstanceID, Hostname: l.hostname, FilePath: st.Path, FileHash: st.FileHash, PolicyHash: st.PolicyHash,
		LoadedAt: &st.LoadedAt}
	if e := st.Error; e != nil {
		p.Error = pgtype.Text{String: e.Message, Valid: true}
		p.ErrorAt = &e.At
		if e.Line > 0 {
			p.ErrorLine = pgtype.Int4{Int32: int32(e.Line), Valid: true}
		}
	}
	if err := l.q.UpsertPolicyInstance(ctx, p); err != nil && ctx.Err() == nil {
		l.cfg.Log.Warn("recording this instance's policy", "err", err)
	}
}

// Run keeps the instance's row current (a heartbeat) and, with a file,
// reloads it when it changes, until ctx ends; the row is deleted then.
// The file's directory is watched, not the file, so that an editor's
// save by rename (or a Kubernetes ConfigMap's symlink swap) is seen; the
// file is read once it has been quiet for Config.Debounce, and reloaded
// only when its bytes changed.
func (l *Loader) Run(ctx context.Context) {
	l.running.Store(&ctx)
	l.report(ctx)
	l.noteShadowRules(ctx)
	// The shadow rules' counts are folded on every instance, one at a time.
	rolled := make(chan struct{})
	go func() {
		defer close(rolled)
		if l.cfg.Pool != nil {
			rollup.Run(ctx, l.cfg.Log, time.Second, func(ctx context.Context) (rollup.Progress, error) { return RollUpShadow(ctx, l.cfg.Pool) })
		}
	}()
	defer func() { <-rolled }()
	defer func() {
		if l.q == nil {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := l.q.DeletePolicyInstance(dctx, l.cfg.InstanceID); err != nil {
			l.cfg.Log.Warn("forgetting this instance's policy row", "err", err)
		}
	}()
	changed := make(chan struct{}, 1)
	if l.cfg.Path != "" {
		stop, err := watch(filepath.Dir(l.cfg.Path), changed)
		if err != nil {
			l.cfg.Log.Warn("not watching the policy file; reload it with SIGHUP", "path", l.cfg.Path, "err", err)
		} else {
			defer stop()
		}
	}
	beat := time.NewTicker(l.cfg.Heartbeat)
	defer beat.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			l.report(ctx)
			if l.q != nil {
				if err := l.q.DeleteStalePolicyInstances(ctx); err != nil && ctx.Err() == nil {
					l.cfg.Log.Warn("forgetting instances gone for a week", "err", err)
				}
			}
		case <-changed:
			quiet = time.After(l.cfg.Debounce)
		case <-quiet:
			quiet = nil
			l.mu.Lock()
			_ = l.reload(ctx, "file change", true) // logged and kept for /admin
			l.mu.Unlock()
		}
	}
}

// Instance is one instance's policy, as it last reported it.
type Instance struct {
	InstanceID, Hostname, Path string
	FileHash, PolicyHash       string
	LoadedAt                   *time.Time
	Error                      *LoadError
	StartedAt, SeenAt          time.Time
	// Gone: not seen for GoneAfter.
	Gone bool
}

// Instances are every instance that reported, those that are not gone
// first.
func (l *Loader) Instances(ctx context.Context) ([]Instance, error) {
	if l == nil || l.q == nil {
		return nil, nil
	}
	rows, err := l.q.ListPolicyInstances(ctx, int32(GoneAfter/time.Second))
	if err != nil {
		return nil, fmt.Errorf("policyfile: list instances: %w", err)
	}
	out := make([]Instance, len(rows))
	for i, r := range rows {
		out[i] = Instance{InstanceID: r.InstanceID, Hostname: r.Hostname, Path: r.FilePath, FileHash: r.FileHash, PolicyHash: r.PolicyHash,
			LoadedAt: r.LoadedAt, StartedAt: r.StartedAt, SeenAt: r.SeenAt, Gone: r.Gone}
		if r.Error.Valid {
			out[i].Error = &LoadError{Message: r.Error.String, Line: int(r.ErrorLine.Int32)}
			if r.ErrorAt != nil {
				out[i].Error.At = *r.ErrorAt
			}
		}
	}
	return out, nil
}
