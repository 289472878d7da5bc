package policy

import (
	"slices"
	"testing"
)

func TestCanonicalClass(t *testing.T) {
	cases := []struct {
		in      string
		want    string
		wantErr bool
	}{
		// Every canonical class is its own canonical form.
		{"read.context", "read.context", false},
		{"draft.compose", "draft.compose", false},
		{"draft.response", "draft.response", false},
		{"tool.call.local", "tool.call.local", false},
		{"email.send.internal", "email.send.internal", false},
		{"calendar.create", "calendar.create", false},
		{"email.send.external", "email.send.external", false},
		{"social.post.public", "social.post.public", false},
		{"proposal.submit", "proposal.submit", false},
		{"payment.initiate", "payment.initiate", false},
		// Every legacy alias.
		{"relationship_followup_drafting", "draft.response", false},
		{"draft_response_drafting", "draft.response", false},
		{"workspace_trust_boundary", "draft.response", false},
		{"referral_ask_drafting", "draft.compose", false},
		{"social.post.external", "social.post.public", false},
		{"calendar.create.external", "calendar.create", false},
		{"payment.spend", "payment.initiate", false},
		// Case and space variants.
		{"Email.Send.External", "email.send.external", false},
		{"  payment.initiate\t", "payment.initiate", false},
		{" Payment.Spend ", "payment.initiate", false},
		{"REFERRAL_ASK_DRAFTING", "draft.compose", false},
		// Valid syntax that no registry knows still canonicalises.
		{"unknown.class", "unknown.class", false},
		{"crm.note_2.add", "crm.note_2.add", false},
		// Invalid.
		{"", "", true},
		{"   ", "", true},
		{"email", "", true},
		{"Email..send", "", true},
		{"email send", "", true},
		{"email.send.", "", true},
		{".email.send", "", true},
		{"email.2send", "", true},
		{"email-send.x", "", true},
		{"email.send\n.x", "", true},
		{"\u212aey.x", "", true}, // Kelvin sign lowercases to k: refused
		{"émail.send", "", true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := CanonicalClass(c.in)
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("CanonicalClass(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.wantErr)
			}
		})
	}
}

func TestDefaultClasses_Groups(t *testing.T) {
	reg := DefaultClasses()
	cases := []struct {
		class string
		want  ClassGroup
		ok    bool
	}{
		{"read.context", GroupInternal, true},
		{"draft.compose", GroupInternal, true},
		{"draft.response", GroupInternal, true},
		{"tool.call.local", GroupInternal, true},
		{"email.send.internal", GroupExternalControlled, true},
		{"calendar.create", GroupExternalControlled, true},
		{"email.send.external", GroupExternal, true},
		{"social.post.public", GroupExternal, true},
		{"proposal.submit", GroupExternal, true},
		{"payment.initiate", GroupHumanOnly, true},
		{"payment.spend", GroupHumanOnly, true},
		{"workspace_trust_boundary", GroupInternal, true},
		{" Social.Post.External", GroupExternal, true},
		{"unknown.class", "", false},
		{"", "", false},
		{"email", "", false},
	}
	for _, c := range cases {
		t.Run(c.class, func(t *testing.T) {
			got, ok := reg.Group(c.class)
			if got != c.want || ok != c.ok {
				t.Errorf("Group(%q) = %q, %v; want %q, %v", c.class, got, ok, c.want, c.ok)
			}
		})
	}
	want := []string{
		"calendar.create", "draft.compose", "draft.response", "email.send.external", "email.send.internal",
		"payment.initiate", "proposal.submit", "read.context", "social.post.public", "tool.call.local",
	}
	if got := reg.Classes(); !slices.Equal(got, want) {
		t.Errorf("Classes() = %q, want %q", got, want)
	}
}

func TestNewClassRegistry(t *testing.T) {
	cases := []struct {
		name    string
		local   map[string]ClassGroup
		wantErr bool
	}{
		{"none", nil, false},
		{"valid local", map[string]ClassGroup{"crm.note.add": GroupInternal}, false},
		{"local human only", map[string]ClassGroup{"bank.wire.send": GroupHumanOnly}, false},
		{"invalid syntax", map[string]ClassGroup{"crm": GroupInternal}, true},
		{"spaces inside", map[string]ClassGroup{"crm note.add": GroupInternal}, true},
		{"redefines a canonical class", map[string]ClassGroup{"payment.initiate": GroupInternal}, true},
		{"redefines one in another case", map[string]ClassGroup{"Payment.Initiate": GroupHumanOnly}, true},
		{"redefines an alias", map[string]ClassGroup{"payment.spend": GroupInternal}, true},
		{"redefines a legacy name", map[string]ClassGroup{"referral_ask_drafting": GroupInternal}, true},
		{"unknown group", map[string]ClassGroup{"crm.note.add": "private"}, true},
		{"two names for one class", map[string]ClassGroup{"crm.note.add": GroupInternal, "CRM.note.add": GroupExternal}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg, err := NewClassRegistry(c.local)
			if (err != nil) != c.wantErr {
				t.Fatalf("NewClassRegistry(%v) error = %v, want error %v", c.local, err, c.wantErr)
			}
			if err != nil {
				return
			}
			if len(reg.Classes()) != len(DefaultClasses().Classes())+len(c.local) {
				t.Errorf("Classes() = %q", reg.Classes())
			}
			for name, group := range c.local {
				if got, ok := reg.Group(name); !ok || got != group {
					t.Errorf("Group(%q) = %q, %v; want %q", name, got, ok, group)
				}
			}
		})
	}
}

func TestClassRegistry_IsImmutable(t *testing.T) {
	local := map[string]ClassGroup{"crm.note.add": GroupInternal}
	reg, err := NewClassRegistry(local)
	if err != nil {
		t.Fatal(err)
	}
	local["crm.note.add"] = GroupHumanOnly
	local["crm.other.add"] = GroupInternal
	classes := reg.Classes()
	classes[0] = "payment.free"
	if g, _ := reg.Group("crm.note.add"); g != GroupInternal {
		t.Errorf("changing the input map changed the registry: %q", g)
	}
	if _, ok := reg.Group("crm.other.add"); ok {
		t.Error("a class added to the input map after construction is known")
	}
	if _, ok := reg.Group("payment.free"); ok {
		t.Error("changing Classes() changed the registry")
	}
	if _, ok := DefaultClasses().Group("crm.note.add"); ok {
		t.Error("a local class leaked into the default registry")
	}
}

func TestClassRegistry_NilKnowsNothing(t *testing.T) {
	var reg *ClassRegistry
	if _, ok := reg.Group("read.context"); ok {
		t.Error("nil registry knows read.context")
	}
	if got := reg.Classes(); got != nil {
		t.Errorf("nil registry Classes() = %q", got)
	}
}
