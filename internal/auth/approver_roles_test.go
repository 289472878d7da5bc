package auth_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// rolesFixture is a workspace with an admin, an approver and a member.
type rolesFixture struct {
	svc                     *auth.Service
	pool                    *pgxpool.Pool
	ws                      uuid.UUID
	admin, approver, member auth.Principal
}

func newRolesFixture(t *testing.T) rolesFixture {
	t.Helper()
	pool := dbtest.MustPool(t)
	f := rolesFixture{svc: auth.NewService(pool, cheap), pool: pool}
	ctx := context.Background()
	var err error
	if f.ws, err = f.svc.EnsureDefaultWorkspace(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		email string
		role  auth.Role
		p     *auth.Principal
	}{{"root@example.com", auth.RoleAdmin, &f.admin}, {"boss@example.com", auth.RoleApprover, &f.approver}, {"ana@example.com", auth.RoleMember, &f.member}} {
		id, err := f.svc.CreateUser(ctx, f.ws, u.email, "a long enough password", u.role)
		if err != nil {
			t.Fatal(err)
		}
		if *u.p, err = f.svc.PrincipalForUser(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

type auditRow struct {
	Action, ActorKind, SubjectType, SubjectID string
	ActorUserID                               *uuid.UUID
	Data                                      map[string]string
}

func (f rolesFixture) auditRows(t *testing.T) []auditRow {
	t.Helper()
	rows, err := f.pool.Query(context.Background(),
		`SELECT action, actor_kind, actor_user_id, subject_type, subject_id, data FROM audit_events WHERE action LIKE 'approver_role.%' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		var data []byte
		if err := rows.Scan(&r.Action, &r.ActorKind, &r.ActorUserID, &r.SubjectType, &r.SubjectID, &data); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r.Data); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestApproverRoles_AdminGrantsAndRevokesWithAuditRows(t *testing.T) {
	t.Parallel()
	f := newRolesFixture(t)
	ctx := context.Background()

	if err := f.svc.GrantApproverRole(ctx, f.admin, " Ana@Example.com ", "finance-approver"); err != nil {
		t.Fatalf("grant: %v", err)
	}
	if err := f.svc.GrantApproverRole(ctx, f.admin, "ana@example.com", "finance-approver"); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("second grant err = %v, want conflict", err)
	}
	holders, err := f.svc.ApproverRoles(ctx, f.ws)
	if err != nil || len(holders) != 1 || holders[0].Role != "finance-approver" || holders[0].Email != "ana@example.com" ||
		holders[0].UserID != f.member.UserID || holders[0].Since.IsZero() {
		t.Fatalf("holders = %+v, %v", holders, err)
	}
	var grantedBy uuid.UUID
	if err := f.pool.QueryRow(ctx, "SELECT granted_by FROM approver_roles").Scan(&grantedBy); err != nil || grantedBy != f.admin.UserID {
		t.Fatalf("granted_by = %v, %v", grantedBy, err)
	}

	if err := f.svc.RevokeApproverRole(ctx, f.admin, "ana@example.com", "finance-approver"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if err := f.svc.RevokeApproverRole(ctx, f.admin, "ana@example.com", "finance-approver"); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("second revoke err = %v, want conflict", err)
	}
	if holders, _ := f.svc.ApproverRoles(ctx, f.ws); len(holders) != 0 {
		t.Fatalf("holders after revoke = %+v", holders)
	}

	// One row per change; the refused second grant and revoke left none.
	rows := f.auditRows(t)
	if len(rows) != 2 {
		t.Fatalf("audit rows = %+v", rows)
	}
	for i, action := range []string{"approver_role.granted", "approver_role.revoked"} {
		r := rows[i]
		if r.Action != action || r.ActorKind != "user" || r.ActorUserID == nil || *r.ActorUserID != f.admin.UserID ||
			r.SubjectType != "user" || r.SubjectID != f.member.UserID.String() ||
			r.Data["role"] != "finance-approver" || r.Data["email"] != "ana@example.com" {
			t.Errorf("audit row %d = %+v", i, r)
		}
	}
}

func TestApproverRoles_OnlyAdminsInPersonOrTheSystem(t *testing.T) {
	t.Parallel()
	f := newRolesFixture(t)
	ctx := context.Background()
	tok, err := f.svc.CreateToken(ctx, "root@example.com", auth.TokenAgent, "admin's bot")
	if err != nil {
		t.Fatal(err)
	}
	adminAgent, err := f.svc.AuthenticateToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	for name, actor := range map[string]auth.Principal{"approver": f.approver, "member": f.member, "admin's agent": adminAgent, "nobody": {}} {
		if err := f.svc.GrantApproverRole(ctx, actor, "ana@example.com", "finance-approver"); apperr.Code(err) != apperr.EFORBIDDEN {
			t.Errorf("%s grants: err = %v, want forbidden", name, err)
		}
		if err := f.svc.RevokeApproverRole(ctx, actor, "ana@example.com", "finance-approver"); apperr.Code(err) != apperr.EFORBIDDEN {
			t.Errorf("%s revokes: err = %v, want forbidden", name, err)
		}
	}
	// The command line acts as the system of the workspace.
	if err := f.svc.GrantApproverRole(ctx, auth.System(f.ws), "ana@example.com", "finance-approver"); err != nil {
		t.Fatalf("system grant: %v", err)
	}
	rows := f.auditRows(t)
	if len(rows) != 1 || rows[0].ActorKind != "system" || rows[0].ActorUserID != nil {
		t.Fatalf("audit rows = %+v", rows)
	}
	var grantedBy *uuid.UUID
	if err := f.pool.QueryRow(ctx, "SELECT granted_by FROM approver_roles").Scan(&grantedBy); err != nil || grantedBy != nil {
		t.Fatalf("granted_by of a system grant = %v, %v", grantedBy, err)
	}
}

func TestApproverRoles_BadNamesAndUnknownEmailsNameTheField(t *testing.T) {
	t.Parallel()
	f := newRolesFixture(t)
	ctx := context.Background()
	// A user of another workspace is unknown here.
	var other uuid.UUID
	if err := f.pool.QueryRow(ctx, "INSERT INTO workspaces (slug, name) VALUES ('other', 'Other') RETURNING id").Scan(&other); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateUser(ctx, other, "stranger@example.com", "a long enough password", auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, email, role string
		fields            []string
	}{
		{"empty role", "ana@example.com", "", []string{"role"}},
		{"one letter", "ana@example.com", "f", []string{"role"}},
		{"capitals", "ana@example.com", "Finance-Approver", []string{"role"}},
		{"underscore", "ana@example.com", "finance_approver", []string{"role"}},
		{"leading digit", "ana@example.com", "1finance", []string{"role"}},
		{"leading hyphen", "ana@example.com", "-finance", []string{"role"}},
		{"64 characters", "ana@example.com", "f" + strings.Repeat("a", 63), []string{"role"}},
		{"workspace role member", "ana@example.com", "member", []string{"role"}},
		{"workspace role approver", "ana@example.com", "approver", []string{"role"}},
		{"workspace role admin", "ana@example.com", "admin", []string{"role"}},
		{"bad email", "not an email", "finance-approver", []string{"email"}},
		{"unknown email", "nobody@example.com", "finance-approver", []string{"email"}},
		{"member of another workspace", "stranger@example.com", "finance-approver", []string{"email"}},
		{"both wrong", "not an email", "Admin!", []string{"role", "email"}},
		{"bad role, unknown email", "nobody@example.com", "admin", []string{"role", "email"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for op, change := range map[string]func(context.Context, auth.Principal, string, string) error{
				"grant": f.svc.GrantApproverRole, "revoke": f.svc.RevokeApproverRole,
			} {
				err := change(ctx, f.admin, c.email, c.role)
				var ae *apperr.Error
				if !asAppErr(err, &ae) || ae.Code != apperr.EINVALID {
					t.Fatalf("%s: err = %v, want invalid", op, err)
				}
				var fields []string
				for _, fe := range ae.Fields {
					fields = append(fields, fe.Field)
				}
				if !slices.Equal(fields, c.fields) || ae.Message == "" {
					t.Fatalf("%s: fields = %v (%q), want %v", op, fields, ae.Message, c.fields)
				}
			}
		})
	}
	if _, err := auth.ParseApproverRole("f" + strings.Repeat("a", 62)); err != nil {
		t.Errorf("63 characters refused: %v", err)
	}
	if rows := f.auditRows(t); len(rows) != 0 {
		t.Fatalf("refused changes were audited: %+v", rows)
	}
}

func TestApproverRoles_SessionAndTokenPrincipalsCarryThem(t *testing.T) {
	t.Parallel()
	f := newRolesFixture(t)
	ctx := context.Background()
	for _, role := range []string{"finance-approver", "audit-approver"} {
		if err := f.svc.GrantApproverRole(ctx, f.admin, "ana@example.com", role); err != nil {
			t.Fatal(err)
		}
	}
	userTok, _ := f.svc.CreateToken(ctx, "ana@example.com", auth.TokenUser, "script")
	agentTok, _ := f.svc.CreateToken(ctx, "ana@example.com", auth.TokenAgent, "bot")
	want := []string{"audit-approver", "finance-approver"}

	session, err := f.svc.PrincipalForUser(ctx, f.member.UserID)
	if err != nil || !slices.Equal(session.ApproverRoles, want) || !session.MayResolve("finance-approver") || session.MayResolve("approver") ||
		!session.CanResolveSome() {
		t.Fatalf("session principal = %+v, %v", session, err)
	}
	signedIn, err := f.svc.Authenticate(ctx, "ana@example.com", "a long enough password")
	if err != nil || !slices.Equal(signedIn.ApproverRoles, want) {
		t.Fatalf("signed-in principal = %+v, %v", signedIn, err)
	}
	user, err := f.svc.AuthenticateToken(ctx, userTok)
	if err != nil || !slices.Equal(user.ApproverRoles, want) || !user.MayResolve("audit-approver") {
		t.Fatalf("user token principal = %+v, %v", user, err)
	}
	agent, err := f.svc.AuthenticateToken(ctx, agentTok)
	if err != nil || !slices.Equal(agent.ApproverRoles, want) || agent.MayResolve("finance-approver") {
		t.Fatalf("agent token principal = %+v, %v (an agent resolves nothing)", agent, err)
	}
	if p, _ := f.svc.PrincipalForUser(ctx, f.approver.UserID); len(p.ApproverRoles) != 0 || p.MayResolve("finance-approver") {
		t.Fatalf("the approver holds %v", p.ApproverRoles)
	}

	// A revoked role is gone from the next request's principal.
	if err := f.svc.RevokeApproverRole(ctx, f.admin, "ana@example.com", "finance-approver"); err != nil {
		t.Fatal(err)
	}
	session, _ = f.svc.PrincipalForUser(ctx, f.member.UserID)
	user, _ = f.svc.AuthenticateToken(ctx, userTok)
	if !slices.Equal(session.ApproverRoles, want[:1]) || !slices.Equal(user.ApproverRoles, want[:1]) || session.MayResolve("finance-approver") {
		t.Fatalf("after revoke: session %v, token %v", session.ApproverRoles, user.ApproverRoles)
	}
	members, err := f.svc.Members(ctx, f.ws)
	if err != nil || len(members) != 3 || members[0].Email != "ana@example.com" || !slices.Equal(members[0].ApproverRoles, want[:1]) ||
		len(members[1].ApproverRoles) != 0 {
		t.Fatalf("members = %+v, %v", members, err)
	}
}
