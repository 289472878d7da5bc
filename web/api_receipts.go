package web

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// receiptCaller is the caller as the receipts service knows them.
func receiptCaller(p auth.Principal) receipts.Caller {
	return receipts.Caller{WorkspaceID: p.WorkspaceID, UserID: p.UserID, TokenID: p.TokenID, Agent: p.IsAgent(), Role: string(p.Role)}
}

// receiptJSON is a receipt on the wire: everything needed to verify it
// (docs/receipts.md), hashes in lowercase hex. Seq, prev_hash, hash and
// chained_at are null while the receipt is pending; content is null once
// redacted.
type receiptJSON struct {
	ReceiptID   string          `json:"receipt_id"`
	Status      string          `json:"status,omitempty"`
	Seq         *int64          `json:"seq"`
	PrevHash    *string         `json:"prev_hash"`
	Hash        *string         `json:"hash"`
	ContentHash string          `json:"content_hash"`
	Metadata    json.RawMessage `json:"metadata"`
	Content     json.RawMessage `json:"content"`
	RedactedFor *string         `json:"redacted_for"`
	RedactedAt  *string         `json:"redacted_at"`
	Kind        string          `json:"kind"`
	CreatedAt   string          `json:"created_at"`
	ChainedAt   *string         `json:"chained_at"`
}

func toReceiptJSON(r receipts.Receipt) receiptJSON {
	out := receiptJSON{ReceiptID: r.ID.String(), Status: "chained", ContentHash: receipts.Hex(r.ContentHash), Metadata: r.Metadata,
		Content: r.Content, Kind: r.Kind, CreatedAt: rfc3339(r.CreatedAt)}
	if r.Pending() {
		out.Status = "pending"
	} else {
		seq, prev, hash := r.Seq, receipts.Hex(r.PrevHash), receipts.Hex(r.Hash)
		out.Seq, out.PrevHash, out.Hash = &seq, &prev, &hash
	}
	if r.RedactedAt != nil {
		why, at := r.RedactedFor, rfc3339(*r.RedactedAt)
		out.RedactedFor, out.RedactedAt = &why, &at
	}
	if r.ChainedAt != nil {
		at := rfc3339(*r.ChainedAt)
		out.ChainedAt = &at
	}
	return out
}

// verificationJSON is a verification on the wire: its status and
// progress (checked receipts of target_seq, the head when it started), and
// its result once done.
type verificationJSON struct {
	ID         string           `json:"id"`
	Status     string           `json:"status"`
	StatusURL  string           `json:"status_url"`
	Checked    int64            `json:"checked"`
	TargetSeq  *int64           `json:"target_seq,omitempty"`
	CreatedAt  string           `json:"created_at"`
	StartedAt  *string          `json:"started_at,omitempty"`
	FinishedAt *string          `json:"finished_at,omitempty"`
	Result     *receipts.Result `json:"result,omitempty"`
	Error      string           `json:"error,omitempty"`
}

func toVerificationJSON(v receipts.Verification) verificationJSON {
	out := verificationJSON{ID: v.ID.String(), Status: v.Status, StatusURL: verificationURL(v), Checked: v.Checked,
		CreatedAt: rfc3339(v.CreatedAt), Result: v.Result, Error: v.Error}
	if v.TargetSeq >= 0 {
		target := v.TargetSeq
		out.TargetSeq = &target
	}
	if v.StartedAt != nil {
		at := rfc3339(*v.StartedAt)
		out.StartedAt = &at
	}
	if v.FinishedAt != nil {
		at := rfc3339(*v.FinishedAt)
		out.FinishedAt = &at
	}
	return out
}

func verificationURL(v receipts.Verification) string {
	return "/api/v1/receipts/verifications/" + v.ID.String()
}

// apiStartVerification handles "POST /api/v1/receipts/verifications": a
// verification of the caller's workspace chain, from seq 1 to its head,
// started in the background, or the one that waits or runs already (any
// user token). 202 with its status URL in Location; poll it.
func (s *Server) apiStartVerification(c echo.Context) error {
	run, err := s.receipts.StartVerification(c.Request().Context(), receiptCaller(principal(c)), 0)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, verificationURL(run))
	c.Response().Header().Set("Retry-After", "1")
	return c.JSON(http.StatusAccepted, toVerificationJSON(run))
}

// apiVerifyReceipts handles "GET /api/v1/receipts/verify": what it always
// meant, a verification of the chain, now started in the background like
// "POST /api/v1/receipts/verifications" (202 and a status URL), since a
// long chain takes longer than a request may.
func (s *Server) apiVerifyReceipts(c echo.Context) error { return s.apiStartVerification(c) }

// apiGetVerification handles "GET /api/v1/receipts/verifications/:id": a
// verification's status and progress, and its result once done (any user
// token of the workspace).
func (s *Server) apiGetVerification(c echo.Context) error {
	id, err := pathID(c, receipts.ErrVerificationNotFound)
	if err != nil {
		return err
	}
	run, err := s.receipts.Verification(c.Request().Context(), receiptCaller(principal(c)), id)
	if err != nil {
		return err
	}
	if !run.Finished() {
		c.Response().Header().Set("Retry-After", "1")
	}
	return c.JSON(http.StatusOK, toVerificationJSON(run))
}

// apiReceiptCheckpoint handles "GET /api/v1/receipts/checkpoint": the
// workspace's head, signed now (any user token).
func (s *Server) apiReceiptCheckpoint(c echo.Context) error {
	cp, err := s.receipts.Checkpoint(c.Request().Context(), receiptCaller(principal(c)), time.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cp)
}

type publicKeyJSON struct {
	KeyID        string `json:"key_id"`
	Algorithm    string `json:"algorithm"`
	PublicKey    string `json:"public_key"`
	PublicKeyPEM string `json:"public_key_pem"`
}

// apiReceiptPublicKey handles "GET /api/v1/receipts/public-key": the key
// that checkpoints verify with (any token).
func (s *Server) apiReceiptPublicKey(c echo.Context) error {
	k, err := s.receipts.PublicKey()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, publicKeyJSON{KeyID: k.KeyID, Algorithm: "Ed25519", PublicKey: base64.StdEncoding.EncodeToString(k.Raw), PublicKeyPEM: k.PEM})
}

// apiExportReceipts handles "GET /api/v1/receipts?after_seq=N&limit=L":
// a page of the chain after seq N, one receipt per line (NDJSON), for
// approvers' and admins' user tokens. Fewer than L lines is the last page.
func (s *Server) apiExportReceipts(c echo.Context) error {
	after, err := queryInt(c, "after_seq", 0)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 1000)
	if err != nil {
		return err
	}
	rows, err := s.receipts.Export(c.Request().Context(), receiptCaller(principal(c)), after, int(limit))
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	for _, r := range rows {
		line := toReceiptJSON(r)
		line.Status = ""
		if err := jsonEncode(w, line); err != nil {
			return nil // the client went away; the status is sent
		}
	}
	return nil
}

// queryInt reads an optional whole-number query parameter.
func queryInt(c echo.Context, name string, def int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, apperr.Invalid("Invalid fields: "+name+".", apperr.FieldError{Field: name, Message: "must be a whole number"})
	}
	return n, nil
}

// apiGetReceipt handles "GET /api/v1/receipts/:id": one receipt, chained
// or pending (approvers' and admins' user tokens).
func (s *Server) apiGetReceipt(c echo.Context) error {
	id, err := pathID(c, receipts.ErrNotFound)
	if err != nil {
		return err
	}
	r, err := s.receipts.Get(c.Request().Context(), receiptCaller(principal(c)), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toReceiptJSON(r))
}

// apiRedactReceipt handles "POST /api/v1/receipts/:id/redact": deletes a
// receipt's content for the reason given (admins' user tokens). The chain
// still verifies; the redaction is receipted and audited.
func (s *Server) apiRedactReceipt(c echo.Context) error {
	id, err := pathID(c, receipts.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		RedactedFor string `json:"redacted_for"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	red, err := s.receipts.Redact(c.Request().Context(), receiptCaller(principal(c)), id, in.RedactedFor, time.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"receipt": toReceiptJSON(red.Receipt), "redaction_receipt_id": red.RedactionReceipt.String()})
}
