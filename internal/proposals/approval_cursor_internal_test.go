package proposals

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A queue cursor reads back only for the list, filter, user and workspace
// it was made for; any altered byte, and anything that is not a cursor,
// is refused.
func TestApprovalCursor_BindsListFilterAndUser(t *testing.T) {
	ws, user := uuid.New(), uuid.New()
	pending := ApprovalFilter{Status: ApprovalPending, Tool: "t.send", Risk: "high"}
	key := []byte("a deployment's cursor key, 32 b")
	mine := approvalCursors{key: key, workspace: ws, user: user, filter: pending}
	pos := queuePosition{At: time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC), ID: uuid.New()}
	c := mine.encode(pos)
	if got, ok := mine.decode(c); !ok || !got.At.Equal(pos.At) || got.ID != pos.ID {
		t.Fatalf("round trip: %+v %v, want %+v", got, ok, pos)
	}
	others := map[string]approvalCursors{
		"another key":       {key: []byte("another deployment's key"), workspace: ws, user: user, filter: pending},
		"another user":      {workspace: ws, user: uuid.New(), filter: pending},
		"another workspace": {workspace: uuid.New(), user: user, filter: pending},
		"another status":    {workspace: ws, user: user, filter: ApprovalFilter{Status: ApprovalApproved, Tool: "t.send", Risk: "high"}},
		"any status":        {workspace: ws, user: user, filter: ApprovalFilter{Tool: "t.send", Risk: "high"}},
		"another tool":      {workspace: ws, user: user, filter: ApprovalFilter{Status: ApprovalPending, Tool: "t.sen", Risk: "high"}},
		"no risk filter":    {workspace: ws, user: user, filter: ApprovalFilter{Status: ApprovalPending, Tool: "t.send"}},
		// The filter's fields are delimited: moving a character from one
		// to the next is another filter.
		"shifted fields": {workspace: ws, user: user, filter: ApprovalFilter{Status: ApprovalPending, Tool: "t.sen", ActionClass: "d", Risk: "high"}},
	}
	for name, other := range others {
		if other.key == nil {
			other.key = key // the same deployment: only the named part differs
		}
		if _, ok := other.decode(c); ok {
			t.Errorf("%s read the cursor", name)
		}
	}
	raw, _ := base64.RawURLEncoding.DecodeString(c)
	for i := range raw {
		for _, bit := range []byte{1, 0x80} {
			altered := append([]byte(nil), raw...)
			altered[i] ^= bit
			if _, ok := mine.decode(base64.RawURLEncoding.EncodeToString(altered)); ok {
				t.Fatalf("byte %d altered (^%#x) was read", i, bit)
			}
		}
	}
	for name, s := range map[string]string{
		"empty": "", "short": c[:len(c)-1], "long": c + "A", "padded": base64.URLEncoding.EncodeToString(raw),
		"standard base64": strings.NewReplacer("-", "+", "_", "/").Replace(c),
		"not base64":      strings.Repeat("!", len(c)),
	} {
		if s == c {
			continue // the alphabets agree on this cursor
		}
		if _, ok := mine.decode(s); ok {
			t.Errorf("%s was read", name)
		}
	}
	// A position PostgreSQL could not read is refused even with a good tag
	// (the tag is a checksum: anyone can compute one).
	far := mine.encode(queuePosition{At: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC), ID: pos.ID})
	if _, ok := mine.decode(far); ok {
		t.Error("a cursor in the year 20000 was read")
	}
}
