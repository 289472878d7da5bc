package chat_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/internal/chat"
	"github.com/gatehouse/gatehouse/internal/chat/chattest"
)

// A turn in a long conversation sends the model its latest lines within a
// bound of lines and characters, and the calls that still wait however
// old they are; never the whole transcript.
func TestTurn_ContextIsBoundedInALongConversation(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
		chattest.Response{Text: []string{"Still here."}},
	)
	s := f.instance(t)
	ctx := context.Background()
	// An early call waits for the owner; its turn is stopped.
	first := f.start(t, s, "Save a note")
	wantState(t, first, chat.StateWaiting)
	if _, err := s.Stop(ctx, f.owner, f.conv, first.ID); err != nil {
		t.Fatal(err)
	}
	// Then 2,000 lines, the last 100 of them long.
	if _, err := f.pool.Exec(ctx, `
		INSERT INTO messages (workspace_id, conversation_id, role, content, author_user_id)
		SELECT $3, $1, CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
		       CASE WHEN i > 1900 THEN 'long line ' || i || ' ' || repeat('x', 3000) ELSE 'line ' || i END, $2
		FROM generate_series(1, 2000) i ORDER BY i`, f.conv, f.owner.UserID, f.owner.WorkspaceID); err != nil {
		t.Fatal(err)
	}

	turn := f.start(t, s, "And now?")
	wantState(t, turn, chat.StateDone)
	reqs := f.model.Requests()
	msgs := reqs[len(reqs)-1].Messages()
	if len(msgs) > 1+60+20+1 {
		t.Fatalf("the model got %d messages, want at most the system prompt, 60 lines, 20 waiting calls and the question", len(msgs))
	}
	chars, waits := 0, false
	for _, m := range msgs[1 : len(msgs)-1] {
		content, _ := m["content"].(string)
		chars += utf8.RuneCountInString(content)
		waits = waits || strings.Contains(content, "still waits: records.put, pending")
	}
	if chars > 24000+20*200 {
		t.Fatalf("the transcript sent is %d characters", chars)
	}
	if !waits {
		t.Fatalf("the waiting call is not in the context:\n%v", msgs[1])
	}
	if last := msgs[len(msgs)-2]["content"].(string); !strings.HasPrefix(last, "long line 2000 ") {
		t.Fatalf("the latest line is not last before the question: %.40q", last)
	}
	if q := msgs[len(msgs)-1]; q["role"] != "user" || q["content"] != "And now?" {
		t.Fatalf("the question is %v", q)
	}
	for _, m := range msgs {
		if c, _ := m["content"].(string); strings.Contains(c, "line 1900 ") || c == "line 1" {
			t.Fatalf("an old line is in the context: %.40q", c)
		}
	}
}
