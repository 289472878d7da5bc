package views

import (
	"strings"

	"github.com/a-h/templ"
)

// IrreversibleNote says what cannot be undone when a call runs, for the
// second confirmation that destructive, irreversible and payment actions
// ask for (data-irreversible on the control; app.js opens the dialog and
// the page handlers require irreversible_ack=1). It is empty for a call
// that can be taken back.
func IrreversibleNote(tool, effect, authority, actionClass string) string {
	switch {
	case strings.HasPrefix(actionClass, "payment."):
		return tool + " is a payment: money that has left cannot be called back from here, and its record stays."
	case effect == "destructive":
		return tool + " destroys data. What it deletes cannot be restored."
	case authority == "irreversible":
		return tool + " cannot be undone once it has run."
	}
	return ""
}

// irreversibleAttrs marks a control whose action cannot be undone.
func irreversibleAttrs(note string) templ.Attributes {
	if note == "" {
		return templ.Attributes{}
	}
	return templ.Attributes{"data-irreversible": note}
}
