package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
)

// PageSize is how many rows one page of the audit log shows.
const PageSize = 50

// Filter is the audit page's filters as typed (they live in the URL):
// an actor's email, an action, an object id (a row's subject, or the
// proposal, packet or scope it is about), a time range (UTC; a date, or a
// date and time) and the keyset cursor (rows older than Before).
type Filter struct {
	Actor, Action, Object, From, To, Before string
}

// Viewer is who reads the log: admins read all of the workspace's rows;
// everyone else the rows about their own conversations, notebooks and
// calls, and their own actions.
type Viewer struct {
	WorkspaceID, UserID uuid.UUID
	Admin               bool
}

// Entry is one audit row as the page shows it.
type Entry struct {
	ID                               int64
	ActorKind, ActorEmail, TokenName string
	Action, SubjectType, SubjectID   string
	Data                             json.RawMessage
	CreatedAt                        time.Time
}

// Page is one page of rows, newest first; Next is the cursor of the next
// (older) page, 0 when there is none.
type Page struct {
	Entries []Entry
	Next    int64
}

var actionPattern = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)+$`)

// List reads one page of the log for v. Filters that cannot be read are
// refused with a message per field (EINVALID), never a server error.
func List(ctx context.Context, q *db.Queries, v Viewer, f Filter) (Page, error) {
	params := db.ListAuditPageParams{WorkspaceID: v.WorkspaceID, AllRows: v.Admin, ViewerID: uuid.NullUUID{UUID: v.UserID, Valid: true}}
	var fields []apperr.FieldError
	bad := func(field, msg string) { fields = append(fields, apperr.FieldError{Field: field, Message: msg}) }

	if a := strings.TrimSpace(f.Action); a != "" {
		if !actionPattern.MatchString(a) || len(a) > 100 {
			bad("action", "is not an action name (like proposal.applied)")
		}
		params.Action = a
	}
	if o := strings.TrimSpace(f.Object); o != "" {
		if len(o) > 200 {
			bad("object", "must have at most 200 characters")
		}
		params.Object = o
	}
	from, err := parseTime(f.From, false)
	if err != nil {
		bad("from", err.Error())
	}
	to, err := parseTime(f.To, true)
	if err != nil {
		bad("to", err.Error())
	}
	if from != nil && to != nil && !from.Before(*to) {
		bad("to", "must be after from")
	}
	params.Since, params.Until = from, to
	if b := strings.TrimSpace(f.Before); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			bad("before", "must be a row number")
		}
		params.Before = pgtype.Int8{Int64: n, Valid: true}
	}
	if a := strings.TrimSpace(f.Actor); a != "" {
		id, err := q.GetMemberIDByEmail(ctx, db.GetMemberIDByEmailParams{WorkspaceID: v.WorkspaceID, Email: a})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			bad("actor", "no member of this workspace has this email")
		case err != nil:
			return Page{}, fmt.Errorf("audit: find actor: %w", err)
		}
		params.ActorUserID = uuid.NullUUID{UUID: id, Valid: err == nil}
	}
	if len(fields) > 0 {
		names := make([]string, len(fields))
		for i, fe := range fields {
			names[i] = fe.Field
		}
		return Page{}, apperr.Invalid("Some filters cannot be read: "+strings.Join(names, ", ")+".", fields...)
	}
	if from != nil || to != nil {
		// The ids the range's rows have: the page reads only those.
		ids, err := q.AuditIDRange(ctx, db.AuditIDRangeParams{WorkspaceID: v.WorkspaceID, Since: from, Until: to})
		if err != nil {
			return Page{}, fmt.Errorf("audit: ids of the time range: %w", err)
		}
		params.MinID = pgtype.Int8{Int64: ids.MinID, Valid: true}
		params.MaxID = pgtype.Int8{Int64: ids.MaxID, Valid: true}
	}
	var rows []db.ListAuditPageRow
	if v.Admin || params.Object != "" {
		if rows, err = q.ListAuditPage(ctx, params); err != nil {
			return Page{}, fmt.Errorf("audit: list: %w", err)
		}
	} else if rows, err = listInWindows(ctx, q, params); err != nil {
		return Page{}, err
	}
	var page Page
	for i, r := range rows {
		if i == PageSize {
			page.Next = page.Entries[PageSize-1].ID
			break
		}
		page.Entries = append(page.Entries, Entry{ID: r.ID, ActorKind: r.ActorKind, ActorEmail: r.ActorEmail, TokenName: r.TokenName,
			Action: r.Action, SubjectType: r.SubjectType, SubjectID: r.SubjectID, Data: r.Data, CreatedAt: r.CreatedAt})
	}
	return page, nil
}

// firstWindow is how many ids a member's page reads first; each next
// window is ten times wider.
var firstWindow int64 = 2000

// listInWindows reads a member's page (no object filter) a window of ids
// at a time, newest first, until it has a page or has read them all. The
// page walks each partition newest first for the rows the member may
// see, and a partition with none of them would be read whole before the
// page could end (a member whose tools never keep rows for years reads
// every long partition): a window bounds each partition's walk.
func listInWindows(ctx context.Context, q *db.Queries, params db.ListAuditPageParams) ([]db.ListAuditPageRow, error) {
	hi, err := q.AuditHead(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: list: newest id: %w", err)
	}
	if params.Before.Valid {
		hi = min(hi, params.Before.Int64-1)
	}
	if params.MaxID.Valid {
		hi = min(hi, params.MaxID.Int64)
	}
	floor := int64(1)
	if params.MinID.Valid {
		floor = max(floor, params.MinID.Int64)
	}
	var rows []db.ListAuditPageRow
	for width := firstWindow; hi >= floor && len(rows) <= PageSize; width *= 10 {
		lo := max(hi-width+1, floor)
		w := params
		w.MinID, w.MaxID = pgtype.Int8{Int64: lo, Valid: true}, pgtype.Int8{Int64: hi, Valid: true}
		got, err := q.ListAuditPage(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("audit: list: %w", err)
		}
		rows = append(rows, got...)
		hi = lo - 1
	}
	return rows, nil
}

// parseTime reads a UTC date ("2026-11-22") or date and time
// ("2026-11-22T08:30", as a datetime-local field sends it, or RFC 3339).
// A date alone as the end of a range includes that whole day.
func parseTime(s string, end bool) (*time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return &t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return &t, nil
		}
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.UTC); err == nil {
		if end {
			t = t.AddDate(0, 0, 1)
		}
		return &t, nil
	}
	return nil, errors.New("is not a date (2026-01-31) or a date and time (2026-01-31T09:30)")
}
