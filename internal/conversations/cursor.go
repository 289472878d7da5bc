package conversations

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/cursor"
)

// A cursor is a position in one conversation's transcript, for one caller
// and one direction, signed so that the caller cannot forge or move it:
//
//	base64url( version 1 | direction 'o' or 'n' | position: 8 bytes | tag: 12 bytes )
//
// where tag = HMAC-SHA256(key, label | conversation id | user id |
// version | direction | position)[:12] and key is the deployment's
// (cursor_keys, migration 27). The conversation and the user are in the
// tag only: a cursor of another conversation, another user or the other
// direction fails like an altered one. Positions are message ids: an
// older cursor ('o', for before) reads the lines with a smaller id, a
// newer one ('n', for after) the lines with a larger id.
const (
	cursorVersion = 1
	cursorTagLen  = 12
	cursorLen     = 2 + 8 + cursorTagLen
	cursorLabel   = "gatehouse transcript cursor"

	older = 'o'
	newer = 'n'
)

// pageCursors signs and checks the cursors of one conversation for one
// caller.
type pageCursors struct {
	key          []byte
	conversation uuid.UUID
	user         uuid.UUID
}

func (c pageCursors) tag(direction byte, pos int64) []byte {
	var b [10]byte
	b[0], b[1] = cursorVersion, direction
	binary.BigEndian.PutUint64(b[2:], uint64(pos))
	return cursor.Tag(c.key, cursorTagLen, []byte(cursorLabel), c.conversation[:], c.user[:], b[:])
}

func (c pageCursors) encode(direction byte, pos int64) string {
	b := make([]byte, 0, cursorLen)
	b = append(b, cursorVersion, direction)
	b = binary.BigEndian.AppendUint64(b, uint64(pos))
	b = append(b, c.tag(direction, pos)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decode returns the position of a cursor of this conversation, caller
// and direction; ok is false for anything else.
func (c pageCursors) decode(direction byte, s string) (pos int64, ok bool) {
	if len(s) != base64.RawURLEncoding.EncodedLen(cursorLen) {
		return 0, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != cursorLen || b[0] != cursorVersion || b[1] != direction {
		return 0, false
	}
	pos = int64(binary.BigEndian.Uint64(b[2:10]))
	if pos < 0 || !hmac.Equal(b[10:], c.tag(direction, pos)) {
		return 0, false
	}
	return pos, true
}
