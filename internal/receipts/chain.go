package receipts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"
)

// The chain. Each workspace's receipts form one hash chain, in seq order
// from 1 with no gaps:
//
//	content_hash = sha256(JCS(content))
//	hash         = sha256(JCS({"receipt_id": R, "seq": S, "prev_hash": P,
//	                           "content_hash": C, "metadata": M}))
//
// where R is the receipt's id as a lowercase, hyphenated UUID string; S is
// seq as a JSON number (an integer; seqs stay far below 2^53); P and C are
// the previous receipt's hash and the content hash as lowercase hex strings
// (64 characters), P being 64 zeros for seq 1; and M is the stored metadata
// object itself (a JSON object, not a string). JCS is RFC 8785. A redaction
// deletes the content but keeps content_hash and metadata, so the chain
// still verifies. docs/receipts.md states this for auditors.

// HashSize is the size of every hash in the chain (SHA-256).
const HashSize = sha256.Size

// GenesisHash is the prev_hash of seq 1: 32 zero bytes.
var GenesisHash = make([]byte, HashSize)

// link is the object whose canonical form the chain hash covers.
type link struct {
	ReceiptID   string          `json:"receipt_id"`
	Seq         int64           `json:"seq"`
	PrevHash    string          `json:"prev_hash"`
	ContentHash string          `json:"content_hash"`
	Metadata    json.RawMessage `json:"metadata"`
}

// ChainHash is a receipt's hash in the chain:
// sha256(JCS({receipt_id, seq, prev_hash, content_hash, metadata})).
func ChainHash(receiptID string, seq int64, prevHash, contentHash []byte, metadata json.RawMessage) ([]byte, error) {
	if m := bytes.TrimSpace(metadata); len(m) == 0 || m[0] != '{' {
		return nil, fmt.Errorf("receipts: metadata of %s is not a JSON object", receiptID)
	}
	if !plainASCII(receiptID) || seq < 0 || seq > maxExactSeq {
		return chainHashOf(link{ReceiptID: receiptID, Seq: seq, PrevHash: hex.EncodeToString(prevHash),
			ContentHash: hex.EncodeToString(contentHash), Metadata: metadata})
	}
	// The canonical form written directly (every verification computes it
	// for every receipt): the members in JCS order, the hex strings and the
	// id needing no escapes, seq an integer ECMAScript prints as is; only
	// the metadata is canonicalised.
	var pre [len(`{"content_hash":"","metadata":`) + 2*HashSize]byte
	b := append(pre[:0], `{"content_hash":"`...)
	b = hex.AppendEncode(b, contentHash)
	b = append(b, `","metadata":`...)
	var post [len(`,"prev_hash":"","receipt_id":"","seq":}`) + 2*HashSize + 36 + 20]byte
	a := append(post[:0], `,"prev_hash":"`...)
	a = hex.AppendEncode(a, prevHash)
	a = append(a, `","receipt_id":"`...)
	a = append(a, receiptID...)
	a = append(a, `","seq":`...)
	a = strconv.AppendInt(a, seq, 10)
	a = append(a, '}')
	return sumCanonical(b, metadata, a)
}

// maxExactSeq is the largest integer a double holds exactly (2^53).
const maxExactSeq = 1 << 53

// chainHashOf is ChainHash through the general canonical form.
func chainHashOf(l link) ([]byte, error) {
	b, err := Canonical(l)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// plainASCII reports whether s is printable ASCII that JSON writes without
// an escape (a UUID always is).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Row is one chained receipt as a verifier sees it: from the database, or
// from an export.
type Row struct {
	ReceiptID   string
	Seq         int64
	PrevHash    []byte
	Hash        []byte
	ContentHash []byte
	Metadata    json.RawMessage
	// Content is nil once redacted.
	Content json.RawMessage
	// Redacted is whether the receipt says it was redacted (redacted_at
	// set), and RedactedFor why.
	Redacted    bool
	RedactedFor string
}

// Result is what a verification found. Checked, HeadSeq and HeadHash
// describe the prefix of the chain that verified: when OK, the whole chain
// and its head. FirstBadSeq is the first seq at which the chain no longer
// verifies, and Reason says why.
type Result struct {
	WorkspaceID string `json:"workspace_id,omitempty"`
	OK          bool   `json:"ok"`
	Checked     int64  `json:"checked"`
	HeadSeq     int64  `json:"head_seq"`
	HeadHash    string `json:"head_hash"`
	FirstBadSeq int64  `json:"first_bad_seq,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// ContentErrors counts the verified receipts whose content could not
	// be canonicalised when they were chained (their metadata says why;
	// the content is kept as text), and FirstContentErrorSeq names the
	// first. They verify like any other receipt.
	ContentErrors        int64 `json:"content_errors,omitempty"`
	FirstContentErrorSeq int64 `json:"first_content_error_seq,omitempty"`
	// Pending counts the receipts that wait for the sequencer (up to
	// 10,000: more says the same), and OldestPendingAt is when the
	// oldest was written. A receipt that has
	// waited longer than the service's bound makes the result not OK: the
	// chain is not keeping up, whatever its chained prefix says.
	Pending         int64      `json:"pending"`
	OldestPendingAt *time.Time `json:"oldest_pending_at,omitempty"`
	// FromSeq is the seq a verification from a checkpoint started at (it
	// read nothing before); absent when it started at seq 1.
	FromSeq int64 `json:"from_seq,omitempty"`
}

// Verifier checks a chain one receipt at a time, in seq order, so a chain
// of any length is verified in constant memory. The zero value is not
// ready: use NewVerifier, NewVerifierAt or ResumeVerifier.
type Verifier struct {
	// prev is the hash the next receipt's prev_hash must equal; nil at a
	// checkpoint's receipt, whose own hash is checked instead.
	prev       []byte
	res        Result
	broken     bool
	expectSeq  int64
	expectHash []byte
}

// NewVerifier starts a verification at seq 1.
func NewVerifier() *Verifier {
	return &Verifier{prev: GenesisHash, res: Result{OK: true, HeadHash: hex.EncodeToString(GenesisHash)}}
}

// NewVerifierAt starts a verification at a checkpoint's receipt (seq, and
// the hash the checkpoint gives it), so only that receipt and the ones
// after it are read: that receipt's content hash and hash are checked, its
// hash must be the checkpoint's, and its prev_hash is taken as stored (the
// hash covers it, so the checkpoint vouches for it). What precedes the
// checkpoint is not looked at: a full verification does that. Seq 0 (a
// checkpoint of the empty chain) and seq 1 start a full verification.
func NewVerifierAt(seq int64, hash []byte) *Verifier {
	v := NewVerifier()
	v.Expect(seq, hash)
	if seq > 1 {
		v.prev = nil
		v.res.HeadSeq, v.res.HeadHash, v.res.FromSeq = seq-1, "", seq
	}
	return v
}

// Progress is how far a verification got: the prefix that verified, and
// the content errors in it. A run saves it after every page and resumes
// from it (ResumeVerifier).
type Progress struct {
	Checked              int64
	HeadSeq              int64
	HeadHash             []byte
	ContentErrors        int64
	FirstContentErrorSeq int64
}

// ResumeVerifier goes on with a verification from seq 1 whose prefix
// through p.HeadSeq verified.
func ResumeVerifier(p Progress) *Verifier {
	if p.HeadSeq == 0 {
		return NewVerifier()
	}
	return &Verifier{prev: p.HeadHash, res: Result{OK: true, Checked: p.Checked, HeadSeq: p.HeadSeq, HeadHash: hex.EncodeToString(p.HeadHash),
		ContentErrors: p.ContentErrors, FirstContentErrorSeq: p.FirstContentErrorSeq}}
}

// Progress is the verified prefix so far.
func (v *Verifier) Progress() Progress {
	return Progress{Checked: v.res.Checked, HeadSeq: v.res.HeadSeq, HeadHash: v.prev,
		ContentErrors: v.res.ContentErrors, FirstContentErrorSeq: v.res.FirstContentErrorSeq}
}

// Next is the seq the verifier expects next.
func (v *Verifier) Next() int64 { return v.res.HeadSeq + 1 }

// Expect makes the verification also prove that the chain extends a
// checkpoint: the receipt at seq has this hash, and the chain reaches it.
func (v *Verifier) Expect(seq int64, hash []byte) {
	v.expectSeq, v.expectHash = seq, hash
}

// Add checks the next receipt. It returns false once the chain is broken
// (at this receipt or before); later receipts are then not looked at.
func (v *Verifier) Add(r Row) bool {
	return v.AddPrepared(r, Prepare(r))
}

// PreparedRow is what checking a receipt computes from the receipt alone
// (its content's verdict and its chain hash), not from the receipts
// before it: Prepare runs on many receipts at once, on several cores
// (PrepareAll), and the verifier then only compares.
type PreparedRow struct {
	// reason is why the receipt itself is wrong, "" when it is not.
	reason string
	// sum is the receipt's chain hash as computed (nil with a reason).
	sum []byte
}

// Prepare computes what checking r needs from r alone.
func Prepare(r Row) PreparedRow {
	if len(r.Hash) != HashSize || len(r.PrevHash) != HashSize || len(r.ContentHash) != HashSize {
		return PreparedRow{reason: fmt.Sprintf("receipt %s has a hash, prev_hash or content_hash that is not 32 bytes", r.ReceiptID)}
	}
	if reason := contentReason(r); reason != "" {
		return PreparedRow{reason: reason}
	}
	sum, err := ChainHash(r.ReceiptID, r.Seq, r.PrevHash, r.ContentHash, r.Metadata)
	if err != nil {
		return PreparedRow{reason: fmt.Sprintf("receipt %s cannot be hashed: %v", r.ReceiptID, err)}
	}
	return PreparedRow{sum: sum}
}

// PrepareAll prepares rows into pre (of the same length), splitting them
// over up to workers goroutines.
func PrepareAll(rows []Row, pre []PreparedRow, workers int) {
	const least = 64 // rows worth a goroutine of their own
	workers = min(workers, (len(rows)+least-1)/least)
	if workers <= 1 {
		for i := range rows {
			pre[i] = Prepare(rows[i])
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (len(rows) + workers - 1) / workers
	for lo := 0; lo < len(rows); lo += chunk {
		hi := min(lo+chunk, len(rows))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				pre[i] = Prepare(rows[i])
			}
		})
	}
	wg.Wait()
}

// AddPrepared is Add with r's prepared part already computed (Prepare).
func (v *Verifier) AddPrepared(r Row, pre PreparedRow) bool {
	if v.broken {
		return false
	}
	want := v.res.HeadSeq + 1
	if reason := v.check(r, want, pre); reason != "" {
		v.broken = true
		v.res.OK, v.res.FirstBadSeq, v.res.Reason = false, want, reason
		return false
	}
	v.prev = r.Hash
	v.res.Checked++
	if hasContentError(r.Metadata) {
		if v.res.ContentErrors == 0 {
			v.res.FirstContentErrorSeq = r.Seq
		}
		v.res.ContentErrors++
	}
	v.res.HeadSeq, v.res.HeadHash = r.Seq, hex.EncodeToString(r.Hash)
	return true
}

// check returns why r cannot be the receipt at seq want, or "" (pre is
// Prepare(r)). The reasons come in the same order as the checks: seq,
// then the receipt itself, then its place after the previous one.
func (v *Verifier) check(r Row, want int64, pre PreparedRow) string {
	switch {
	case r.Seq > want:
		return fmt.Sprintf("seq %d is missing: the chain goes from seq %d to seq %d", want, want-1, r.Seq)
	case r.Seq < want:
		return fmt.Sprintf("expected seq %d, found seq %d again or out of order (receipt %s)", want, r.Seq, r.ReceiptID)
	case pre.reason != "":
		return pre.reason
	}
	if v.prev != nil && !bytes.Equal(r.PrevHash, v.prev) {
		if want == 1 {
			return fmt.Sprintf("the prev_hash of seq 1 (receipt %s) is not 32 zero bytes", r.ReceiptID)
		}
		return fmt.Sprintf("the prev_hash of receipt %s is not the hash of seq %d", r.ReceiptID, want-1)
	}
	if !bytes.Equal(pre.sum, r.Hash) {
		return fmt.Sprintf("the hash of receipt %s does not match its receipt_id, seq, prev_hash, content_hash and metadata", r.ReceiptID)
	}
	if v.expectHash != nil && r.Seq == v.expectSeq && !bytes.Equal(r.Hash, v.expectHash) {
		return fmt.Sprintf("the hash of seq %d differs from the checkpoint's head_hash: the chain was rewritten", r.Seq)
	}
	return ""
}

// contentReason is why r's content does not match its content hash and
// redaction, or "".
func contentReason(r Row) string {
	content := bytes.TrimSpace(r.Content)
	absent := len(content) == 0 || bytes.Equal(content, []byte("null"))
	switch {
	case absent && !r.Redacted:
		return fmt.Sprintf("receipt %s has no content but is not marked redacted", r.ReceiptID)
	case !absent && r.Redacted:
		return fmt.Sprintf("receipt %s is marked redacted but still has content", r.ReceiptID)
	case r.Redacted && r.RedactedFor == "":
		return fmt.Sprintf("receipt %s is redacted without a reason (redacted_for)", r.ReceiptID)
	case !absent:
		if content[0] != '{' {
			return fmt.Sprintf("the content of receipt %s is not a JSON object", r.ReceiptID)
		}
		sum, err := ContentHash(json.RawMessage(content))
		if err != nil {
			return fmt.Sprintf("the content of receipt %s cannot be canonicalised: %v", r.ReceiptID, err)
		}
		if !bytes.Equal(sum, r.ContentHash) {
			return fmt.Sprintf("the content of receipt %s does not match its content_hash", r.ReceiptID)
		}
	}
	return ""
}

// endsBefore breaks the chain at the seq expected next, which should be
// there: the chain had seq through when the verification started, and
// receipts are never removed.
func (v *Verifier) endsBefore(through int64) {
	if v.broken || v.res.HeadSeq >= through {
		return
	}
	v.broken = true
	want := v.res.HeadSeq + 1
	v.res.OK, v.res.FirstBadSeq = false, want
	v.res.Reason = fmt.Sprintf("seq %d is missing: the chain reached seq %d when the verification started, and receipts are never removed", want, through)
}

// Result is the outcome so far; call it after the last receipt. A chain
// that ends before an expected checkpoint seq is broken at the first
// missing seq.
func (v *Verifier) Result() Result {
	res := v.res
	if res.OK && v.expectHash != nil && res.HeadSeq < v.expectSeq {
		res.OK, res.FirstBadSeq = false, res.HeadSeq+1
		res.Reason = fmt.Sprintf("the chain ends at seq %d, before the checkpoint's seq %d: receipts were removed", res.HeadSeq, v.expectSeq)
	}
	return res
}

// Verify checks a whole chain given in seq order from seq 1: gapless seq,
// each content against its content_hash (a redacted receipt's stored
// content_hash is taken as is, once its redaction is consistent), each
// prev_hash against the previous hash, and each hash. Any change but a
// redaction is reported at the first receipt it affects.
func Verify(rows iter.Seq[Row]) Result {
	v := NewVerifier()
	for r := range rows {
		if !v.Add(r) {
			break
		}
	}
	return v.Result()
}

// hasContentError reports whether metadata marks a quarantined content
// (ContentErrorKey).
func hasContentError(metadata json.RawMessage) bool {
	if !bytes.Contains(metadata, []byte(`"`+ContentErrorKey+`"`)) {
		return false // the common case, without decoding
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return false
	}
	_, ok := m[ContentErrorKey]
	return ok
}
