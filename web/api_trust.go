package web

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/internal/trust"
)

type thresholdJSON struct {
	CILow      float64 `json:"ci_low"`
	MinSamples int     `json:"min_samples"`
}

type posteriorJSON struct {
	ActionClass     string        `json:"action_class"`
	Alpha           float64       `json:"alpha"`
	Beta            float64       `json:"beta"`
	Mean            float64       `json:"mean"`
	CILow           float64       `json:"ci_low"`
	CIHigh          float64       `json:"ci_high"`
	CIWidth         float64       `json:"ci_width"`
	Samples         int           `json:"samples"`
	Tier            string        `json:"tier"`
	GraduationReady bool          `json:"graduation_ready"`
	Threshold       thresholdJSON `json:"threshold"`
}

func toPosteriorJSON(p trust.Posterior) posteriorJSON {
	return posteriorJSON{ActionClass: p.ActionClass, Alpha: p.Alpha, Beta: p.Beta, Mean: p.Mean, CILow: p.CILow, CIHigh: p.CIHigh, CIWidth: p.CIWidth,
		Samples: p.Samples, Tier: string(p.Tier), GraduationReady: p.GraduationReady,
		Threshold: thresholdJSON{CILow: p.Threshold.CILow, MinSamples: p.Threshold.MinSamples}}
}

type evidenceJSON struct {
	ID               int64   `json:"id"`
	ActionClass      string  `json:"action_class"`
	Label            string  `json:"label"`
	Provenance       string  `json:"provenance"`
	DecisionWeight   float64 `json:"decision_weight"`
	ProvenanceWeight float64 `json:"provenance_weight"`
	Weight           float64 `json:"weight"`
	Note             string  `json:"note,omitempty"`
	ProposalID       string  `json:"proposal_id,omitempty"`
	ReceiptID        string  `json:"receipt_id,omitempty"`
	RecordedBy       string  `json:"recorded_by,omitempty"`
	CreatedAt        string  `json:"created_at"`
}

func idString(id uuid.UUID) string {
	if id == uuid.Nil {
		return ""
	}
	return id.String()
}

type violationJSON struct {
	ID          string `json:"id"`
	ActionClass string `json:"action_class"`
	ReceiptID   string `json:"receipt_id,omitempty"`
	Category    string `json:"category"`
	Reason      string `json:"reason"`
	FlaggedBy   string `json:"flagged_by,omitempty"`
	CreatedAt   string `json:"created_at"`
	Open        bool   `json:"open"`
	ClearedAt   string `json:"cleared_at,omitempty"`
	ClearedBy   string `json:"cleared_by,omitempty"`
	ClearNote   string `json:"clear_note,omitempty"`
}

func toViolationJSON(v trust.Violation) violationJSON {
	out := violationJSON{ID: v.ID.String(), ActionClass: v.ActionClass, ReceiptID: idString(v.ReceiptID), Category: string(v.Category), Reason: v.Reason,
		FlaggedBy: idString(v.FlaggedBy), CreatedAt: rfc3339(v.CreatedAt), Open: v.Open(), ClearedBy: idString(v.ClearedBy), ClearNote: v.ClearNote}
	if v.ClearedAt != nil {
		out.ClearedAt = rfc3339(*v.ClearedAt)
	}
	return out
}

// optionalUUID parses an optional id field of a body; malformed is 422
// naming the field.
func optionalUUID(field, s string) (uuid.UUID, error) {
	if s == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, apperr.Invalid("The field "+field+" is not an id.", apperr.FieldError{Field: field, Message: "must be a UUID"})
	}
	return id, nil
}

// apiRecordEvidence handles "POST /api/v1/evidence": the caller's own
// judgment on an action class, weighed by who they are (a person's is the
// principal's, a connector token's a connector's, an agent's
// model-inferred).
func (s *Server) apiRecordEvidence(c echo.Context) error {
	var in struct {
		ActionClass string `json:"action_class"`
		Label       string `json:"label"`
		Note        string `json:"note"`
		ProposalID  string `json:"proposal_id"`
		ReceiptID   string `json:"receipt_id"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	proposal, err := optionalUUID("proposal_id", in.ProposalID)
	if err != nil {
		return err
	}
	receipt, err := optionalUUID("receipt_id", in.ReceiptID)
	if err != nil {
		return err
	}
	e, err := s.trust.RecordExplicit(c.Request().Context(), principal(c), trust.ExplicitEvidence{ActionClass: in.ActionClass, Label: in.Label,
		Note: in.Note, ProposalID: proposal, ReceiptID: receipt})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, evidenceJSON{ID: e.ID, ActionClass: e.ActionClass, Label: string(e.Label), Provenance: string(e.Provenance),
		DecisionWeight: e.DecisionWeight, ProvenanceWeight: e.ProvenanceWeight, Weight: e.Weight, Note: e.Note, ProposalID: idString(e.ProposalID),
		ReceiptID: idString(e.ReceiptID), RecordedBy: idString(e.RecordedBy), CreatedAt: rfc3339(e.CreatedAt)})
}

// apiFlagViolation handles "POST /api/v1/receipts/:id/violation".
func (s *Server) apiFlagViolation(c echo.Context) error {
	id, err := pathID(c, apperr.Errorf(apperr.ENOTFOUND, "No receipt of this workspace has that id."))
	if err != nil {
		return err
	}
	var in struct {
		Category string `json:"category"`
		Reason   string `json:"reason"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	v, err := s.trust.FlagViolation(c.Request().Context(), principal(c), id, in.Category, in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toViolationJSON(v))
}

// apiClearViolation handles "POST /api/v1/violations/:id/clear".
func (s *Server) apiClearViolation(c echo.Context) error {
	id, err := pathID(c, trust.ErrViolationNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Note string `json:"note"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	v, err := s.trust.ClearViolation(c.Request().Context(), principal(c), id, in.Note)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toViolationJSON(v))
}

// apiListViolations handles "GET /api/v1/violations" (?open=true for the
// open ones only).
func (s *Server) apiListViolations(c echo.Context) error {
	open := false
	if q := c.QueryParam("open"); q != "" {
		var err error
		if open, err = strconv.ParseBool(q); err != nil {
			return apperr.Invalid("open must be true or false.", apperr.FieldError{Field: "open", Message: "must be true or false"})
		}
	}
	list, err := s.trust.Violations(c.Request().Context(), principal(c), open)
	if err != nil {
		return err
	}
	out := make([]violationJSON, len(list))
	for i, v := range list {
		out[i] = toViolationJSON(v)
	}
	return c.JSON(http.StatusOK, map[string]any{"violations": out})
}

// apiListActionClasses handles "GET /api/v1/action-classes": every class
// with its posterior; with ?approval_fatigue=true, also the approval-
// fatigue numbers per class and tool that /trust shows.
func (s *Server) apiListActionClasses(c echo.Context) error {
	withFatigue := false
	if q := c.QueryParam("approval_fatigue"); q != "" {
		var err error
		if withFatigue, err = strconv.ParseBool(q); err != nil {
			return apperr.Invalid("approval_fatigue must be true or false.", apperr.FieldError{Field: "approval_fatigue", Message: "must be true or false"})
		}
	}
	list, err := s.trust.Posteriors(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	out := make([]posteriorJSON, len(list))
	for i, p := range list {
		out[i] = toPosteriorJSON(p)
	}
	body := map[string]any{"action_classes": out}
	if withFatigue {
		f, err := s.trust.Fatigue(c.Request().Context(), principal(c), time.Now(), s.toolKind)
		if err != nil {
			return err
		}
		body["approval_fatigue"] = toFatigueJSON(f)
	}
	return c.JSON(http.StatusOK, body)
}

// fatigueJSON is the approval-fatigue numbers over the API (the /trust
// page's table).
type fatigueJSON struct {
	// From and Until are UTC dates, Until excluded.
	From     string `json:"from"`
	Until    string `json:"until"`
	Days     int    `json:"days"`
	Updating bool   `json:"updating"`
	Rule     struct {
		MinDecisions         int     `json:"min_decisions"`
		FastWithinSeconds    int     `json:"fast_within_seconds"`
		FastShareAbove       float64 `json:"fast_share_above"`
		RejectedShareAtLeast float64 `json:"rejected_share_at_least"`
	} `json:"rule"`
	Tools []toolFatigueJSON `json:"tools"`
}

type toolFatigueJSON struct {
	ActionClass   string  `json:"action_class"`
	Tool          string  `json:"tool"`
	Decisions     int64   `json:"decisions"`
	Approvals     int64   `json:"approvals"`
	FastApprovals int64   `json:"fast_approvals"`
	Rejections    int64   `json:"rejections"`
	FastShare     float64 `json:"fast_approval_share"`
	RejectedShare float64 `json:"rejected_share"`
	// MedianSeconds is approximate: read from a log-scale histogram.
	MedianSeconds float64 `json:"median_decision_seconds"`
	Suggestion    string  `json:"suggestion"`
	Grantable     bool    `json:"grantable"`
}

func toFatigueJSON(f trust.Fatigue) fatigueJSON {
	out := fatigueJSON{From: f.From.Format(time.DateOnly), Until: f.Until.Format(time.DateOnly), Days: trust.FatigueDays, Updating: f.Updating,
		Tools: make([]toolFatigueJSON, len(f.Tools))}
	out.Rule.MinDecisions, out.Rule.FastWithinSeconds = trust.FatigueMinDecisions, int(intent.FastApproval.Seconds())
	out.Rule.FastShareAbove, out.Rule.RejectedShareAtLeast = trust.FatigueFastShare, trust.FatigueRejectedShare
	for i, t := range f.Tools {
		out.Tools[i] = toolFatigueJSON{ActionClass: t.ActionClass, Tool: t.Tool, Decisions: t.Decisions, Approvals: t.Approvals,
			FastApprovals: t.FastApprovals, Rejections: t.Rejections, FastShare: t.FastShare(), RejectedShare: t.RejectedShare(),
			MedianSeconds: math.Round(t.MedianDecision.Seconds()*10) / 10, Suggestion: string(t.Suggestion), Grantable: t.Ungrantable == ""}
	}
	return out
}

// apiGetPosterior handles "GET /api/v1/action-classes/:class/posterior".
func (s *Server) apiGetPosterior(c echo.Context) error {
	p, err := s.trust.Posterior(c.Request().Context(), principal(c), c.Param("class"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toPosteriorJSON(p))
}

// apiSetThreshold handles "PUT /api/v1/action-classes/:class/threshold"
// (admins).
func (s *Server) apiSetThreshold(c echo.Context) error {
	var in struct {
		thresholdJSON
		Reason string `json:"reason"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := s.trust.SetThreshold(c.Request().Context(), principal(c), c.Param("class"), trust.Threshold{CILow: in.CILow, MinSamples: in.MinSamples}, in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toPosteriorJSON(p))
}
