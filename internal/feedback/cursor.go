package feedback

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/cursor"
)

// A cursor is a position in the triage list of one filter, for one
// caller, signed so that the caller cannot forge or move it (the design
// of the approvals queue's cursors, signed with the deployment's key like
// the transcript's):
//
//	base64url( version 1 | created_at: 8 bytes | id: 16 bytes | tag: 12 bytes )
//
// The position is the last item a page showed or read: its creation time
// in microseconds, and its id; the next page starts after it (older).
// tag = HMAC-SHA256(key, label | workspace | user | filter | version |
// position)[:12], where key is the deployment's (cursor_keys, migration
// 27) and the filter is since (as asked: none, or its time), severity,
// tool and status. A cursor that was altered, or that belongs to another
// filter, user or workspace, is refused. What a page reads is decided by
// the query (the caller's workspace), never by the cursor.
const (
	cursorVersion = 1
	cursorTagLen  = 12
	cursorLabel   = "gatehouse feedback cursor"
)

// ErrCursor is a cursor that is not one of this list's for this caller.
var ErrCursor = apperr.Invalid("The page cursor cannot be read: it was altered, or it belongs to another filter or user. Start again from the first page.",
	apperr.FieldError{Field: "cursor", Message: "is not a cursor of this list for this filter and user"})

// position is an item's place in the list: newest first, then by id.
type position struct {
	At time.Time
	ID uuid.UUID
}

// start is before every item of the list (newest first): after the
// largest time PostgreSQL reads and the largest id.
var start = position{At: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), ID: uuid.Max}

// pageCursors signs and checks the cursors of one filter's list for one
// caller.
type pageCursors struct {
	key             []byte
	workspace, user uuid.UUID
	filter          Filter
}

func newPageCursors(key []byte, p auth.Principal, f Filter) pageCursors {
	return pageCursors{key: key, workspace: p.WorkspaceID, user: p.UserID, filter: f}
}

// filter is the filter's part of the tag.
func (c pageCursors) filterBytes() []byte {
	var b []byte
	since := int64(0) // no since: the default window, whenever it is asked
	if !c.filter.Since.IsZero() {
		since = c.filter.Since.UnixMicro()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(since))
	for _, v := range []string{c.filter.Severity, c.filter.Tool, c.filter.Status} {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

func (c pageCursors) encode(pos position) string {
	return cursor.EncodePosition(c.key, cursorTagLen, []byte{cursorVersion}, pos.At, pos.ID,
		[]byte(cursorLabel), c.workspace[:], c.user[:], c.filterBytes())
}

// decode returns the position of a cursor of this filter's list and
// caller; ok is false for anything else.
func (c pageCursors) decode(s string) (pos position, ok bool) {
	pos.At, pos.ID, ok = cursor.DecodePosition(c.key, cursorTagLen, []byte{cursorVersion}, s,
		[]byte(cursorLabel), c.workspace[:], c.user[:], c.filterBytes())
	return pos, ok
}
