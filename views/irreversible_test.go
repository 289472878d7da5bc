package views

import (
	"strings"
	"testing"
)

func TestIrreversibleNote(t *testing.T) {
	cases := []struct {
		tool, effect, authority, class string
		want                           string // a part of the note; "" for none
	}{
		{"records.get", "read", "read", "read.context", ""},
		{"records.put", "mutate", "write-idempotent", "tool.call.local", ""},
		{"email.send", "mutate", "write-non-idempotent", "email.send.external", ""},
		{"records.delete", "destructive", "irreversible", "tool.call.local", "records.delete destroys data"},
		{"archive.purge", "mutate", "irreversible", "tool.call.local", "archive.purge cannot be undone"},
		{"payment.initiate", "destructive", "irreversible", "payment.initiate", "payment.initiate is a payment"},
	}
	for _, c := range cases {
		got := IrreversibleNote(c.tool, c.effect, c.authority, c.class)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("IrreversibleNote(%s) = %q, want it to say %q", c.tool, got, c.want)
		}
	}
}
