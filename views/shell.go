// Package views holds the templ components: pages and htmx partials. They
// receive plain view models, never database rows.
package views

import "encoding/json"

// Shell is what every page's layout needs.
type Shell struct {
	Title string
	// CSRF is the token that state-changing requests must echo back.
	CSRF string
	// User is nil on pages for signed-out visitors.
	User *ShellUser
	// Nav names the active header link: "conversations", "notebooks", "admin".
	Nav string
	// Counts are what waits for the user (nil: not shown).
	Counts *NavCounts
}

// ShellUser is the signed-in user as the header shows them.
type ShellUser struct {
	Email      string
	Role       string
	CanApprove bool
	// CanResolve shows the approvals queue: approvers, admins and holders
	// of a named approver role.
	CanResolve bool
}

// hxHeaders makes htmx send the CSRF token with every request.
func hxHeaders(csrf string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": csrf})
	return string(b)
}

// htmxConfig keeps htmx within the Content-Security-Policy (no injected
// styles) and lets it swap 422 responses, so forms re-render with errors.
const htmxConfig = `{"includeIndicatorStyles":false,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"422","swap":true},{"code":"[45]..","swap":false,"error":true}]}`

// Member is one row of the admin members list.
type Member struct {
	Email         string
	Role          string
	Since         string
	ApproverRoles []string
}
