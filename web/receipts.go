package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/views"
)

// receiptsPage handles "GET /admin/receipts" (approvers and admins): the
// chain's head, what waits for the sequencer, a checkpoint signed now and
// the latest receipts, or one proposal's (?proposal=ID); with ?verify=1,
// the chain verified now ("Verify now" without JavaScript).
func (s *Server) receiptsPage(c echo.Context) error {
	v, err := s.receiptsView(c, c.QueryParam("verify") == "1")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ReceiptsPage(s.shell(c, "Receipts", "admin"), v))
}

// verifyReceiptsNow handles "GET /admin/receipts/verify" (approvers and
// admins): the page's "Verify now", as an htmx fragment.
func (s *Server) verifyReceiptsNow(c echo.Context) error {
	res, err := s.receipts.Verify(c.Request().Context(), receiptCaller(principal(c)))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.VerificationResult(verificationView(res)))
}

func verificationView(res receipts.Result) views.VerificationView {
	v := views.VerificationView{OK: res.OK, Checked: strconv.FormatInt(res.Checked, 10), HeadSeq: strconv.FormatInt(res.HeadSeq, 10),
		HeadHash: res.HeadHash, FirstBadSeq: strconv.FormatInt(res.FirstBadSeq, 10), Reason: res.Reason}
	if res.ContentErrors > 0 {
		v.ContentErrors, v.FirstContentErrorSeq = strconv.FormatInt(res.ContentErrors, 10), strconv.FormatInt(res.FirstContentErrorSeq, 10)
	}
	return v
}

// receiptsView reads the chain's overview for the page.
func (s *Server) receiptsView(c echo.Context, verify bool) (views.ReceiptsView, error) {
	var proposal uuid.UUID
	if p := c.QueryParam("proposal"); p != "" {
		var err error
		if proposal, err = uuid.Parse(p); err != nil {
			return views.ReceiptsView{}, apperr.Invalid("proposal is not a proposal id.", apperr.FieldError{Field: "proposal", Message: "must be a proposal id"})
		}
	}
	now := time.Now()
	o, err := s.receipts.Overview(c.Request().Context(), receiptCaller(principal(c)), proposal, 50, verify, now)
	if err != nil {
		return views.ReceiptsView{}, err
	}
	v := views.ReceiptsView{HeadSeq: strconv.FormatInt(o.HeadSeq, 10), HeadHash: receipts.Hex(o.HeadHash), Pending: strconv.FormatInt(o.Pending, 10)}
	if o.Pending > 0 {
		v.OldestPending = now.Sub(o.Oldest).Round(time.Millisecond).String()
	}
	if o.Checkpoint != nil {
		b, _ := json.MarshalIndent(o.Checkpoint, "", "  ")
		v.Checkpoint, v.KeyID = string(b), o.Checkpoint.KeyID
	}
	if proposal != uuid.Nil {
		v.Proposal = proposal.String()
	}
	if o.Verification != nil {
		vv := verificationView(*o.Verification)
		v.Verification = &vv
	}
	for _, r := range o.Recent {
		row := views.ReceiptRow{ID: r.ID.String(), Seq: "pending", Kind: r.Kind, When: r.CreatedAt,
			ActionClass: r.ActionClass, RedactedFor: r.RedactedFor}
		if !r.Pending() {
			row.Seq = strconv.FormatInt(r.Seq, 10)
		}
		if r.ProposalID != uuid.Nil {
			row.ProposalID = r.ProposalID.String()
		}
		var pretty bytes.Buffer
		if r.Content != nil && json.Indent(&pretty, r.Content, "", "  ") == nil {
			row.Content = pretty.String()
		}
		v.Rows = append(v.Rows, row)
	}
	return v, nil
}
