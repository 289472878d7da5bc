package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

var (
	formInput    = regexp.MustCompile(`<input ([^>]*)>`)
	formTextarea = regexp.MustCompile(`(?s)<textarea ([^>]*)>(.*?)</textarea>`)
	formAttr     = regexp.MustCompile(`([a-z_-]+)(?:="([^"]*)")?`)
)

// settingsForm is what a browser submits from the settings page as it is:
// disabled fields left out, checkboxes and radios only when checked, then
// change applied.
func settingsForm(page string, change url.Values) url.Values {
	form := url.Values{}
	attrs := func(s string) map[string]string {
		m := map[string]string{}
		for _, a := range formAttr.FindAllStringSubmatch(s, -1) {
			m[a[1]] = html.UnescapeString(a[2])
		}
		return m
	}
	for _, in := range formInput.FindAllStringSubmatch(page, -1) {
		a := attrs(in[1])
		_, disabled := a["disabled"]
		_, checked := a["checked"]
		if a["name"] == "" || a["name"] == "_csrf" || disabled || ((a["type"] == "checkbox" || a["type"] == "radio") && !checked) {
			continue
		}
		v := a["value"]
		if a["type"] == "checkbox" {
			v = "on"
		}
		form.Add(a["name"], v)
	}
	for _, ta := range formTextarea.FindAllStringSubmatch(page, -1) {
		form.Set(attrs(ta[1])["name"], html.UnescapeString(ta[2]))
	}
	for k, v := range change {
		form[k] = v
	}
	return form
}

// settingsFile pins auto_approve_high_risk (off) and sets a longer
// shortest rationale as a default.
const settingsFile = `settings:
  auto_approve_high_risk: false
  rationale_min_length: 25
  pinned: [auto_approve_high_risk]
`

// TestSettingsFile_APinnedSettingIsReadOnlyAndCannotBeChanged: the page
// shows it read-only with where it is set, a POST that changes it is
// refused with a readable message naming it, and nothing is saved; the
// page's own form still saves the other settings.
func TestSettingsFile_APinnedSettingIsReadOnlyAndCannotBeChanged(t *testing.T) {
	t.Parallel()
	r := newReloadEnv(t, settingsFile)
	admin := r.user("admin@example.com", auth.RoleAdmin)
	resp, page := admin.get("/admin/settings")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("settings page: %d", resp.StatusCode)
	}
	checkbox := regexp.MustCompile(`<input type="checkbox" name="auto_approve_high_risk"[^>]*>`).FindString(page)
	if !strings.Contains(checkbox, " disabled") || !regexp.MustCompile(`data-testid="pinned-auto_approve_high_risk"[^>]*>set in gatehouse.yaml<`).MatchString(page) || !strings.Contains(page, r.path) {
		t.Fatalf("the pinned setting is not shown read-only: %s\n%s", checkbox, page)
	}
	if rationale := regexp.MustCompile(`<input type="number" name="rationale_min_length"[^>]*>`).FindString(page); strings.Contains(rationale, "readonly") || !strings.Contains(rationale, `value="25"`) {
		t.Fatalf("the file's default is not an editable 25: %s", rationale)
	}
	before := r.count(`SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed'`)

	// A POST that turns it on, as a hand-made form would.
	resp, page = admin.postForm("/admin/settings", settingsForm(page, url.Values{"auto_approve_high_risk": {"on"}, "rationale_min_length": {"40"}}))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "Nothing was saved: auto_approve_high_risk is set in the policy file (gatehouse.yaml)") ||
		!strings.Contains(page, "is set in gatehouse.yaml (pinned)") {
		t.Fatalf("a change to a pinned setting: %d\n%s", resp.StatusCode, page)
	}
	if on := r.count(`SELECT count(*) FROM workspaces WHERE auto_approve_high_risk OR rationale_min_length <> 25`); on != 0 ||
		r.count(`SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed'`) != before {
		t.Fatal("a refused POST saved something")
	}

	// The page's own form changes what is not pinned.
	_, page = admin.get("/admin/settings")
	if resp, body := admin.postForm("/admin/settings", settingsForm(page, url.Values{"rationale_min_length": {"40"}})); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the unpinned settings: %d\n%s", resp.StatusCode, body)
	}
	if n := r.count(`SELECT count(*) FROM workspaces WHERE rationale_min_length = 40 AND NOT auto_approve_high_risk`); n != 1 {
		t.Fatal("the unpinned setting was not saved")
	}

	// A file that pins it on: written, audited as the file's, and the
	// page's form (which sends the pinned value) still saves.
	if err := r.reload(strings.Replace(settingsFile, "auto_approve_high_risk: false", "auto_approve_high_risk: true", 1)); err != nil {
		t.Fatal(err)
	}
	if r.count(`SELECT count(*) FROM workspaces WHERE auto_approve_high_risk`) != 1 ||
		r.count(`SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed' AND data->>'setting' = 'auto_approve_high_risk' AND data->>'by' = 'policy file' AND (data->>'pinned')::boolean AND actor_user_id IS NULL`) != 1 {
		t.Fatal("the pinned value was not written and audited as the file's")
	}
	_, page = admin.get("/admin/settings")
	if resp, body := admin.postForm("/admin/settings", settingsForm(page, url.Values{"rationale_min_length": {"45"}})); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving with a pinned setting on: %d\n%s", resp.StatusCode, body)
	}
	resp, page = admin.postForm("/admin/settings", settingsForm(page, url.Values{"auto_approve_high_risk": nil}))
	if resp.StatusCode != http.StatusUnprocessableEntity || r.count(`SELECT count(*) FROM workspaces WHERE auto_approve_high_risk AND rationale_min_length = 45`) != 1 {
		t.Fatalf("turning a pinned setting off: %d\n%s", resp.StatusCode, page)
	}
}

// TestSettingsFile_AnUnpinnedValueIsADefaultAppliedOnce: written when the
// file introduces it, then the page may change it; the file writes it
// again only when its own value changes.
func TestSettingsFile_AnUnpinnedValueIsADefaultAppliedOnce(t *testing.T) {
	t.Parallel()
	r := newReloadEnv(t, settingsFile)
	admin := r.user("admin@example.com", auth.RoleAdmin)
	rationaleIs := func(n int) bool {
		return r.count(`SELECT count(*) FROM workspaces WHERE rationale_min_length = $1`, n) == 1
	}
	if !rationaleIs(25) || r.count(`SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed' AND data->>'setting' = 'rationale_min_length' AND data->>'by' = 'policy file' AND NOT (data->>'pinned')::boolean`) != 1 {
		t.Fatal("the file's default was not written and audited")
	}
	_, page := admin.get("/admin/settings")
	if resp, body := admin.postForm("/admin/settings", settingsForm(page, url.Values{"rationale_min_length": {"40"}})); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the page changes a default: %d\n%s", resp.StatusCode, body)
	}
	// The same file again (a reload that changes nothing of it): kept.
	if err := r.reload(settingsFile + "\n# a comment\n"); err != nil || !rationaleIs(40) {
		t.Fatalf("an unchanged default was written again: %v", err)
	}
	// The file changes its value: written.
	changed := strings.Replace(settingsFile, "rationale_min_length: 25", "rationale_min_length: 30", 1)
	if err := r.reload(changed); err != nil || !rationaleIs(30) {
		t.Fatalf("a changed default was not written: %v", err)
	}
	// Dropped from the file and brought back with the same value: written
	// again (the file introduces it anew).
	_, page = admin.get("/admin/settings")
	admin.postForm("/admin/settings", settingsForm(page, url.Values{"rationale_min_length": {"50"}}))
	if err := r.reload("settings:\n  auto_approve_high_risk: false\n  pinned: [auto_approve_high_risk]\n"); err != nil || !rationaleIs(50) {
		t.Fatalf("dropping a default changed the setting: %v", err)
	}
	if err := r.reload(changed); err != nil || !rationaleIs(30) {
		t.Fatalf("a default the file brings back was not written: %v", err)
	}
}
