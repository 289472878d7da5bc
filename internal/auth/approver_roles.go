package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Named approver roles (finance-approver…) are held by users in a
// workspace, beside their workspace role. A tool may name one for its
// approval packets; only its holders resolve them. Admins grant and revoke
// them, and every change is audited.

// approverRoleName is the shape the approver_roles table checks too.
var approverRoleName = regexp.MustCompile(`^[a-z][a-z0-9-]{1,62}$`)

// ParseApproverRole validates the name of a named approver role: 2 to 63
// lowercase letters, digits and hyphens, starting with a letter, and not a
// workspace role (member, approver, admin).
func ParseApproverRole(s string) (string, error) {
	s = strings.TrimSpace(s)
	if _, err := ParseRole(s); err == nil {
		msg := s + " is a workspace role; a named approver role has another name, such as finance-approver"
		return "", apperr.Invalid(strings.ToUpper(msg[:1])+msg[1:]+".", apperr.FieldError{Field: "role", Message: msg})
	}
	if !approverRoleName.MatchString(s) {
		msg := "must be 2 to 63 lowercase letters, digits or hyphens, starting with a letter (finance-approver)"
		return "", apperr.Invalid("A role name "+msg+".", apperr.FieldError{Field: "role", Message: msg})
	}
	return s, nil
}

// ApproverRoleHolder is one user holding one named approver role.
type ApproverRoleHolder struct {
	Role   string
	UserID uuid.UUID
	Email  string
	// Since is when the role was granted.
	Since time.Time
}

// Member is one member of a workspace with the named approver roles they hold.
type Member struct {
	UserID        uuid.UUID
	Email         string
	Role          Role
	Since         time.Time
	ApproverRoles []string
}

var errAdminsOnlyRoles = apperr.Errorf(apperr.EFORBIDDEN, "Only admins grant and revoke approver roles.")

// mayManageRoles admits admins in person (not their agents) and the system
// (the command line).
func mayManageRoles(actor Principal) error {
	if actor.IsSystem() || (actor.IsAdmin() && !actor.IsAgent()) {
		return nil
	}
	return errAdminsOnlyRoles
}

// GrantApproverRole gives the member with that email a named approver role
// in the actor's workspace (admins only). Granting a role the member holds
// already is ECONFLICT.
func (s *Service) GrantApproverRole(ctx context.Context, actor Principal, email, role string) error {
	return s.changeApproverRole(ctx, actor, email, role, true)
}

// RevokeApproverRole takes a named approver role from the member with that
// email (admins only). Revoking a role the member does not hold is
// ECONFLICT. Packets resolve against the roles held when they resolve, so
// a revoked role stops resolving at once.
func (s *Service) RevokeApproverRole(ctx context.Context, actor Principal, email, role string) error {
	return s.changeApproverRole(ctx, actor, email, role, false)
}

func (s *Service) changeApproverRole(ctx context.Context, actor Principal, email, role string, grant bool) error {
	if err := mayManageRoles(actor); err != nil {
		return err
	}
	role, roleErr := ParseApproverRole(role)
	email, emailErr := NormalizeEmail(email)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("auth: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	// The email is looked up even when the role is wrong, so a form names
	// every field at fault at once.
	var m db.GetMemberByEmailRow
	if emailErr == nil {
		m, err = q.GetMemberByEmail(ctx, db.GetMemberByEmailParams{WorkspaceID: actor.WorkspaceID, Email: email})
		if errors.Is(err, pgx.ErrNoRows) {
			emailErr = apperr.Invalid(fmt.Sprintf("No member of this workspace has the email %s.", email),
				apperr.FieldError{Field: "email", Message: "no member of this workspace has this email"})
		} else if err != nil {
			return fmt.Errorf("auth: get member: %w", err)
		}
	}
	if err := joinInvalid(roleErr, emailErr); err != nil {
		return err
	}
	action := "approver_role.granted"
	if grant {
		grantedBy := uuid.NullUUID{UUID: actor.UserID, Valid: actor.UserID != uuid.Nil}
		n, err := q.GrantApproverRole(ctx, db.GrantApproverRoleParams{WorkspaceID: actor.WorkspaceID, UserID: m.UserID, Role: role, GrantedBy: grantedBy})
		if err != nil {
			return fmt.Errorf("auth: grant approver role: %w", err)
		}
		if n == 0 {
			return apperr.Errorf(apperr.ECONFLICT, "%s holds the role %s already.", email, role)
		}
	} else {
		action = "approver_role.revoked"
		n, err := q.RevokeApproverRole(ctx, db.RevokeApproverRoleParams{WorkspaceID: actor.WorkspaceID, UserID: m.UserID, Role: role})
		if err != nil {
			return fmt.Errorf("auth: revoke approver role: %w", err)
		}
		if n == 0 {
			return apperr.Errorf(apperr.ECONFLICT, "%s does not hold the role %s.", email, role)
		}
	}
	if err := audit.Record(ctx, q, actor, actor.WorkspaceID, action, "user", m.UserID.String(), map[string]any{"role": role, "email": email}); err != nil {
		return err
	}
	if _, err := receipts.RecordChange(ctx, q, receipts.KindRoleChange, receipts.ActorOf(actor, string(actor.Role)), actor.WorkspaceID,
		map[string]any{"action": action, "role": role, "user_id": m.UserID.String()}, time.Now()); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	// The user's cached tokens carry their roles: read them afresh.
	s.tokens.forget(func(p Principal) bool { return p.UserID == m.UserID })
	return nil
}

// joinInvalid merges validation errors into one EINVALID error that names
// every field at fault; nil when there are none.
func joinInvalid(errs ...error) error {
	var out *apperr.Error
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ae *apperr.Error
		if !errors.As(err, &ae) {
			return err
		}
		if out == nil {
			out = apperr.Invalid(ae.Message)
		}
		out.Fields = append(out.Fields, ae.Fields...)
	}
	if out == nil {
		return nil
	}
	return out
}

// ApproverRoles lists every named approver role held in the workspace, by
// role and then email.
func (s *Service) ApproverRoles(ctx context.Context, workspaceID uuid.UUID) ([]ApproverRoleHolder, error) {
	rows, err := s.q.ListApproverRoles(ctx, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("auth: list approver roles: %w", err)
	}
	out := make([]ApproverRoleHolder, len(rows))
	for i, r := range rows {
		out[i] = ApproverRoleHolder{Role: r.Role, UserID: r.UserID, Email: r.Email, Since: r.CreatedAt}
	}
	return out, nil
}

// Members lists the workspace's members by email, with their named
// approver roles.
func (s *Service) Members(ctx context.Context, workspaceID uuid.UUID) ([]Member, error) {
	rows, err := s.q.ListMembers(ctx, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("auth: list members: %w", err)
	}
	out := make([]Member, len(rows))
	for i, r := range rows {
		out[i] = Member{UserID: r.UserID, Email: r.Email, Role: Role(r.Role), Since: r.CreatedAt, ApproverRoles: r.ApproverRoles}
	}
	return out, nil
}
