package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
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
// chain's head, what waits for the sequencer, the verified head, a
// checkpoint signed now and the latest receipts, or one proposal's
// (?proposal=ID). With ?verify=1 ("Verify now" without JavaScript) it
// starts a verification, or joins the one that runs, and shows its result
// if it ends within pageWait, else its progress; ?verification=ID shows
// that run; otherwise the run that waits or runs, if any.
func (s *Server) receiptsPage(c echo.Context) error {
	v, err := s.receiptsView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ReceiptsPage(s.shell(c, "Receipts", "admin"), v))
}

// receiptContent handles "GET /admin/receipts/:id/content" (approvers
// and admins): one receipt's content, indented, as the text of the
// page's <pre>, fetched when its row is opened. The page lists the latest
// receipts without their contents (each a few KiB of a call's arguments),
// so it stays the same size however large they are.
func (s *Server) receiptContent(c echo.Context) error {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return receipts.ErrNotFound
	}
	r, err := s.receipts.Get(c.Request().Context(), receiptCaller(principal(c)), id)
	if err != nil {
		return err
	}
	text := "Redacted: " + r.RedactedFor
	if r.Content != nil {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, r.Content, "", "  "); err != nil {
			return fmt.Errorf("receipt %s: indent content: %w", id, err)
		}
		text = pretty.String()
	}
	return c.HTML(http.StatusOK, html.EscapeString(text))
}

// pageWait is how long "Verify now" waits for a verification before it
// shows its progress: a short chain's result comes at once.
const pageWait = 2 * time.Second

// verifyReceiptsNow handles "GET /admin/receipts/verify" (approvers and
// admins): the page's "Verify now", as an htmx fragment. It starts a
// verification in the background, or joins the one that runs, and answers
// its result if it ends within pageWait, else its progress (which polls).
func (s *Server) verifyReceiptsNow(c echo.Context) error {
	run, err := s.receipts.StartVerification(c.Request().Context(), receiptCaller(principal(c)), pageWait)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.VerificationRun(verificationRunView(run)))
}

// receiptVerificationFragment handles "GET /admin/receipts/verifications/:id"
// (approvers and admins): a verification's progress, polled every second,
// then its result.
func (s *Server) receiptVerificationFragment(c echo.Context) error {
	id, err := pathID(c, receipts.ErrVerificationNotFound)
	if err != nil {
		return err
	}
	run, err := s.receipts.Verification(c.Request().Context(), receiptCaller(principal(c)), id)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.VerificationRun(verificationRunView(run)))
}

func verificationRunView(run receipts.Verification) views.VerificationRunView {
	v := views.VerificationRunView{ID: run.ID.String(), Status: run.Status, Checked: strconv.FormatInt(run.Checked, 10), Error: run.Error, Percent: "0"}
	if run.TargetSeq >= 0 {
		v.Target = strconv.FormatInt(run.TargetSeq, 10)
		if run.TargetSeq > 0 {
			v.Percent = strconv.FormatInt(min(100, 100*run.Checked/run.TargetSeq), 10)
		}
	}
	if run.Result != nil {
		r := verificationView(*run.Result)
		v.Result = &r
	}
	return v
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
func (s *Server) receiptsView(c echo.Context) (views.ReceiptsView, error) {
	oq := receipts.OverviewQuery{Recent: 50, Verify: c.QueryParam("verify") == "1", Wait: pageWait}
	for name, id := range map[string]*uuid.UUID{"proposal": &oq.Proposal, "verification": &oq.Verification} {
		if p := c.QueryParam(name); p != "" {
			var err error
			if *id, err = uuid.Parse(p); err != nil {
				return views.ReceiptsView{}, apperr.Invalid(name+" is not a "+name+" id.", apperr.FieldError{Field: name, Message: "must be a " + name + " id"})
			}
		}
	}
	proposal := oq.Proposal
	now := time.Now()
	o, err := s.receipts.Overview(c.Request().Context(), receiptCaller(principal(c)), oq, now)
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
		vv := verificationRunView(*o.Verification)
		v.Verification = &vv
	}
	if o.Verified != nil {
		v.VerifiedSeq, v.VerifiedHash, v.VerifiedAt = strconv.FormatInt(o.Verified.Seq, 10), receipts.Hex(o.Verified.Hash), o.Verified.VerifiedAt
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
		v.Rows = append(v.Rows, row)
	}
	return v, nil
}
