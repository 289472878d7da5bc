package replay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Defaults and bounds of a replay.
const (
	// DefaultPageSize is how many calls one query reads.
	DefaultPageSize = 1000
	// DefaultExamples is how many example calls of each kind a group keeps.
	DefaultExamples = 3
	// MaxExamples bounds them.
	MaxExamples = 100
	// clockMargin widens the range of ids scanned beyond the period: an id
	// is stamped by the clock of the instance that made it, created_at by
	// the database's.
	clockMargin = time.Hour
	// window is the span of ids one page may reach (it stops sooner when
	// full): a page costs what the window holds at most, whatever the
	// period.
	window = 6 * time.Hour
)

// Service replays recorded calls under a candidate policy file.
type Service struct {
	pool     *pgxpool.Pool
	registry *tools.Registry
}

// NewService replays the calls recorded in pool; registry is the one the
// server decides with (its action classes; which tools are built in).
func NewService(pool *pgxpool.Pool, registry *tools.Registry) *Service {
	return &Service{pool: pool, registry: registry}
}

// Options say which calls a replay reads and how much it keeps.
type Options struct {
	// Since and Until bound the calls' creation times: [Since, Until).
	Since, Until time.Time
	// WorkspaceID is the one workspace to read (uuid.Nil: every one).
	WorkspaceID uuid.UUID
	// Examples is how many example calls of each kind a group keeps.
	Examples int
	// PageSize is how many calls one query reads (0: DefaultPageSize).
	PageSize int
	// StopAt, when set, stops the replay at the first page boundary after
	// it (at least one page is read); the report says it stopped early.
	StopAt time.Time
}

// ParseFile parses a candidate policy file with the server's parser and
// the registry's action classes. Headers' ${NAME} placeholders are not
// read from the environment: a replay never calls an upstream, so the
// file's secrets need not be set where it runs.
func ParseFile(data []byte, classes *policy.ClassRegistry) (*tools.PolicyFile, error) {
	return tools.ParsePolicyFile(data, classes, func(string) string { return "unused-by-replay" })
}

// ParseFile is ParseFile with the service's registry.
func (s *Service) ParseFile(data []byte) (*tools.PolicyFile, error) {
	return ParseFile(data, s.registry.Classes())
}

// Replay decides every call of the period again under file and reports
// what would change. It reads in one read-only transaction, a page at a
// time. A deadline on ctx, or StopAt, ends it early with the calls read
// so far (Report.StoppedEarly); any other error is returned.
func (s *Service) Replay(ctx context.Context, file *tools.PolicyFile, o Options) (Report, error) {
	if !o.Since.Before(o.Until) {
		return Report{}, apperr.Invalid("The period must end after it starts.", apperr.FieldError{Field: "since", Message: "must be before the end of the period"})
	}
	size := o.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Report{}, fmt.Errorf("replay: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := db.New(tx)
	candidate, err := s.candidate(ctx, q, file)
	if err != nil {
		return Report{}, err
	}
	tally := NewTally(candidate, s.registry.Classes(), min(o.Examples, MaxExamples))
	after, end := idAt(o.Since.Add(-clockMargin)), o.Until.Add(clockMargin)
	windowEnd := msOf(after).Add(window)
	stopped := false
	for page := 0; ; page++ {
		if page > 0 && !o.StopAt.IsZero() && !time.Now().Before(o.StopAt) {
			stopped = true
			break
		}
		calls, err := s.page(ctx, q, o, after, idAt(windowEnd), size)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				stopped = true
				break
			}
			return Report{}, fmt.Errorf("replay: read calls: %w", err)
		}
		for _, c := range calls {
			tally.Add(c)
		}
		if len(calls) == size {
			after = calls[len(calls)-1].ID // more in this window
			continue
		}
		if !windowEnd.Before(end) {
			break
		}
		// The window is read: the next one starts where it ended.
		after, windowEnd = idAt(windowEnd), windowEnd.Add(window)
	}
	r := tally.Report()
	r.Since, r.Until, r.StoppedEarly = o.Since, o.Until, stopped
	if o.WorkspaceID != uuid.Nil {
		ws := o.WorkspaceID
		r.WorkspaceID = &ws
	}
	return r, nil
}

// page reads the next page of calls after the id after.
func (s *Service) page(ctx context.Context, q *db.Queries, o Options, after, before uuid.UUID, size int) ([]Call, error) {
	var out []Call
	if o.WorkspaceID == uuid.Nil {
		rows, err := q.ReplayCallsPage(ctx, db.ReplayCallsPageParams{After: after, Before: before, Since: o.Since, Until: o.Until, PageSize: int32(size)})
		for _, r := range rows {
			out = append(out, Call{ID: r.ID, WorkspaceID: r.WorkspaceID, Tool: r.Tool, Status: r.Status, Edited: r.Edited, Input: r.DecisionInput, CreatedAt: r.CreatedAt})
		}
		return out, err
	}
	rows, err := q.ReplayWorkspaceCallsPage(ctx, db.ReplayWorkspaceCallsPageParams{WorkspaceID: o.WorkspaceID, After: after, Before: before,
		Since: o.Since, Until: o.Until, PageSize: int32(size)})
	for _, r := range rows {
		out = append(out, Call{ID: r.ID, WorkspaceID: r.WorkspaceID, Tool: r.Tool, Status: r.Status, Edited: r.Edited, Input: r.DecisionInput, CreatedAt: r.CreatedAt})
	}
	return out, err
}

// candidate is file with the upstream tools' pinned annotations: the
// definition accepted, else the one last seen. A pin that does not read
// back (or hash to itself) gives no hints, as a tool that never listed.
func (s *Service) candidate(ctx context.Context, q *db.Queries, file *tools.PolicyFile) (*Candidate, error) {
	pins, err := q.ListUpstreamTools(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: read pins: %w", err)
	}
	annotations := make(map[string]tools.Annotations, len(pins))
	for _, p := range pins {
		hash, def := p.DefinitionHash, []byte(p.Definition)
		if p.AcceptedHash.Valid {
			hash, def = p.AcceptedHash.String, p.AcceptedDefinition
		}
		u, err := tools.UpstreamToolFromDefinition(p.Upstream, hash, def)
		if err != nil {
			continue
		}
		annotations[u.DeclaredName()] = u.Annotations
	}
	builtin := func(name string) bool {
		t, ok := s.registry.Get(name)
		return ok && t.Upstream == ""
	}
	return NewCandidate(file, annotations, builtin), nil
}

// idAt is the smallest time-ordered id (UUIDv7) stamped at t's
// millisecond: every id made at t or later sorts after it.
func idAt(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := max(t.UnixMilli(), 0)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	copy(id[:6], b[2:])
	return id
}

// msOf is the time an id made by idAt (or any UUIDv7) is stamped with, to
// the millisecond.
func msOf(id uuid.UUID) time.Time {
	var b [8]byte
	copy(b[2:], id[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:])))
}

// FindWorkspace is the workspace a command line names by id, slug or name.
func (s *Service) FindWorkspace(ctx context.Context, name string) (uuid.UUID, error) {
	q := db.New(s.pool)
	if id, err := uuid.Parse(name); err == nil {
		if _, err := q.GetWorkspace(ctx, id); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return uuid.Nil, apperr.Errorf(apperr.ENOTFOUND, "No workspace has the id %s.", id)
			}
			return uuid.Nil, fmt.Errorf("replay: read workspace: %w", err)
		}
		return id, nil
	}
	rows, err := q.FindWorkspacesByName(ctx, name)
	if err != nil {
		return uuid.Nil, fmt.Errorf("replay: find workspace: %w", err)
	}
	switch len(rows) {
	case 0:
		return uuid.Nil, apperr.Errorf(apperr.ENOTFOUND, "No workspace is called %q.", name)
	case 1:
		return rows[0].ID, nil
	}
	return uuid.Nil, apperr.Errorf(apperr.EINVALID, "More than one workspace is called %q: name it by id.", name)
}

// Periods are what the admin page replays, by name.
var Periods = map[string]time.Duration{"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// PageBudget is how long the admin page's replay may read; it reports
// what it read by then.
const PageBudget = 15 * time.Second

// Authorize admits admins (in a browser or with a user token), never an
// agent: a replay shows every call of the workspace.
func Authorize(p auth.Principal) error {
	if p.IsAgent() || !p.IsAdmin() {
		return apperr.Errorf(apperr.EFORBIDDEN, "Only admins replay a policy file.")
	}
	return nil
}

// ReplayWorkspace is the admin page's replay: the candidate file's text
// over the admin's own workspace, for the named period up to now, read
// for at most PageBudget. A file that does not parse is EINVALID with one
// field error ("policy") per error, each naming its line.
func (s *Service) ReplayWorkspace(ctx context.Context, p auth.Principal, text, period string, now time.Time) (Report, error) {
	if err := Authorize(p); err != nil {
		return Report{}, err
	}
	var fields []apperr.FieldError
	d, ok := Periods[period]
	if !ok {
		fields = append(fields, apperr.FieldError{Field: "period", Message: "must be 1d, 7d or 30d"})
	}
	var file *tools.PolicyFile
	if strings.TrimSpace(text) == "" {
		fields = append(fields, apperr.FieldError{Field: "policy", Message: "paste the candidate gatehouse.yaml"})
	} else if f, err := s.ParseFile([]byte(text)); err != nil {
		for _, msg := range FileErrors(err) {
			fields = append(fields, apperr.FieldError{Field: "policy", Message: msg})
		}
	} else {
		file = f
	}
	if len(fields) > 0 {
		return Report{}, apperr.Invalid("The replay did not run; fix the fields below.", fields...)
	}
	ctx, cancel := context.WithTimeout(ctx, PageBudget+5*time.Second)
	defer cancel()
	return s.Replay(ctx, file, Options{Since: now.Add(-d), Until: now, WorkspaceID: p.WorkspaceID, Examples: DefaultExamples, StopAt: time.Now().Add(PageBudget)})
}

// FileErrors are a policy file's errors, one message each (the parser
// names each one's line).
func FileErrors(err error) []string {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		var out []string
		for _, e := range joined.Unwrap() {
			out = append(out, FileErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}
