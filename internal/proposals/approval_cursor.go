package proposals

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/cursor"
)

// A queue cursor is a position in one list of the approvals queue (one
// filter), for one caller:
//
//	base64url( version 1 | list: 'p', 's' or 'a' | time: 8 bytes | id: 16 bytes | tag: 12 bytes )
//
// The position is the last packet a page showed or read: its expiry in
// the pending list ('p'), its creation time in a resolved status's list
// ('s') or in the list of any status ('a'), in microseconds, and its id.
// tag = HMAC-SHA256(key, label | workspace | user | filter | version |
// list | position)[:12], with the deployment's cursor key (cursor_keys,
// as every list's cursors): a cursor that was altered, made up, or that
// belongs to another filter, list, user or workspace, is refused. (What
// a page reads is decided by the query, the caller's workspace and the
// roles they resolve, never by the cursor.)
const (
	queueCursorVersion = 1
	queueCursorTagLen  = 12
	queueCursorLabel   = "gatehouse approvals queue cursor"
)

// ErrApprovalCursor is a cursor that is not one of this list's for this
// caller.
var ErrApprovalCursor = apperr.Invalid("The page cursor cannot be read: it was altered, or it belongs to another filter or user. Start again from the first page.",
	apperr.FieldError{Field: "cursor", Message: "is not a cursor of this list for this filter and user"})

// queuePosition is a packet's place in its list: the time the list is
// ordered by, then the id.
type queuePosition struct {
	At time.Time
	ID uuid.UUID
}

// approvalCursors makes and reads the cursors of one filter's list for one
// caller.
type approvalCursors struct {
	key             []byte
	workspace, user uuid.UUID
	filter          ApprovalFilter
}

func newApprovalCursors(key []byte, p auth.Principal, f ApprovalFilter) approvalCursors {
	return approvalCursors{key: key, workspace: p.WorkspaceID, user: p.UserID, filter: f}
}

// list is the filter's list: its order and its index.
func (c approvalCursors) list() byte {
	switch c.filter.Status {
	case ApprovalPending:
		return 'p'
	case "":
		return 'a'
	}
	return 's'
}

// filterBytes is the filter's part of the tag, each field delimited.
func (c approvalCursors) filterBytes() []byte {
	var b []byte
	for _, v := range []string{c.filter.Status, c.filter.Tool, c.filter.ActionClass, c.filter.Risk} {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

func (c approvalCursors) encode(pos queuePosition) string {
	return cursor.EncodePosition(c.key, queueCursorTagLen, []byte{queueCursorVersion, c.list()}, pos.At, pos.ID,
		[]byte(queueCursorLabel), c.workspace[:], c.user[:], c.filterBytes())
}

// decode returns the position of a cursor of this list, filter and
// caller; ok is false for anything else.
func (c approvalCursors) decode(s string) (pos queuePosition, ok bool) {
	pos.At, pos.ID, ok = cursor.DecodePosition(c.key, queueCursorTagLen, []byte{queueCursorVersion, c.list()}, s,
		[]byte(queueCursorLabel), c.workspace[:], c.user[:], c.filterBytes())
	return pos, ok
}
