package receipts_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/receipts"
)

// chainOf builds a valid chain of n receipts in memory, as the sequencer
// would.
func chainOf(t *testing.T, n int) []receipts.Row {
	t.Helper()
	rows := make([]receipts.Row, n)
	prev := receipts.GenesisHash
	for i := range rows {
		content := json.RawMessage(fmt.Sprintf(`{"kind":"execution","n":%d,"note":"é\u2028<>","x":1e-7,"y":1e21}`, i))
		rows[i] = seal(t, receipts.Row{ReceiptID: uuid.NewString(), Seq: int64(i + 1), Content: content,
			Metadata: json.RawMessage(fmt.Sprintf(`{"kind":"execution","time":"2026-01-0%dT00:00:00Z"}`, i%9+1))}, prev, true)
		prev = rows[i].Hash
	}
	return rows
}

// seal sets a row's prev_hash and hash (and its content_hash from its
// content, when withContent).
func seal(t *testing.T, r receipts.Row, prev []byte, withContent bool) receipts.Row {
	t.Helper()
	if withContent {
		sum, err := receipts.ContentHash(r.Content)
		if err != nil {
			t.Fatal(err)
		}
		r.ContentHash = sum
	}
	r.PrevHash = prev
	h, err := receipts.ChainHash(r.ReceiptID, r.Seq, prev, r.ContentHash, r.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	r.Hash = h
	return r
}

func TestVerify_EachChangeIsFoundAtTheFirstReceiptItAffects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		change  func(t *testing.T, rows []receipts.Row) []receipts.Row
		badSeq  int64
		because string
	}{
		{"untouched", func(_ *testing.T, rows []receipts.Row) []receipts.Row { return rows }, 0, ""},
		{"a redaction", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[3].Content, rows[3].Redacted, rows[3].RedactedFor = nil, true, "personal data"
			return rows
		}, 0, ""},
		{"a redaction exported as null", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[3].Content, rows[3].Redacted, rows[3].RedactedFor = json.RawMessage("null"), true, "personal data"
			return rows
		}, 0, ""},
		{"content changed", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[4].Content = json.RawMessage(strings.Replace(string(rows[4].Content), `"n":4`, `"n":40`, 1))
			return rows
		}, 5, "does not match its content_hash"},
		{"content reordered and respaced is the same content", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[4].Content = json.RawMessage(`{ "y": 1000000000000000000000, "x": 0.0000001, "note": "é\u2028\u003c>", "n": 4.0, "kind": "execution" }`)
			return rows
		}, 0, ""},
		{"content dropped without a redaction", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[2].Content = nil
			return rows
		}, 3, "not marked redacted"},
		{"marked redacted but content kept", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[2].Redacted, rows[2].RedactedFor = true, "x"
			return rows
		}, 3, "still has content"},
		{"two receipts swapped", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[2], rows[6] = rows[6], rows[2]
			rows[2].Seq, rows[6].Seq = 3, 7
			return rows
		}, 3, "prev_hash"},
		{"a receipt deleted", func(_ *testing.T, rows []receipts.Row) []receipts.Row { return slices.Delete(rows, 5, 6) }, 6, "seq 6 is missing"},
		{"a receipt repeated", func(_ *testing.T, rows []receipts.Row) []receipts.Row { return slices.Insert(rows, 5, rows[4]) }, 6, "expected seq 6, found seq 5"},
		{"a receipt inserted with a well-formed hash", func(t *testing.T, rows []receipts.Row) []receipts.Row {
			forged := seal(t, receipts.Row{ReceiptID: uuid.NewString(), Seq: 6, Content: json.RawMessage(`{"kind":"execution"}`), Metadata: json.RawMessage(`{}`)}, rows[4].Hash, true)
			for i := 5; i < len(rows); i++ {
				rows[i].Seq++
			}
			return slices.Insert(rows, 5, forged)
		}, 7, "prev_hash"},
		{"a hash changed", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			h := sha256.Sum256(rows[7].Hash)
			rows[7].Hash = h[:]
			return rows
		}, 8, "the hash of receipt"},
		{"a content_hash changed with its content", func(t *testing.T, rows []receipts.Row) []receipts.Row {
			rows[1].Content = json.RawMessage(`{"kind":"nothing happened"}`)
			sum, _ := receipts.ContentHash(rows[1].Content)
			rows[1].ContentHash = sum
			return rows
		}, 2, "the hash of receipt"},
		{"one receipt rewritten whole", func(t *testing.T, rows []receipts.Row) []receipts.Row {
			rows[1].Content = json.RawMessage(`{"kind":"nothing happened"}`)
			rows[1] = seal(t, rows[1], rows[0].Hash, true)
			return rows
		}, 3, "prev_hash"},
		{"metadata changed", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[0].Metadata = json.RawMessage(`{"kind":"refusal"}`)
			return rows
		}, 1, "the hash of receipt"},
		{"a short hash", func(_ *testing.T, rows []receipts.Row) []receipts.Row {
			rows[8].Hash = rows[8].Hash[:31]
			return rows
		}, 9, "not 32 bytes"},
	}
	// Each change is found the same way by Verify, one receipt at a time,
	// and by a verification that prepares a long page's receipts on four
	// goroutines first (what the server's does, PrepareAll).
	ways := []struct {
		name   string
		n      int
		verify func([]receipts.Row) receipts.Result
	}{
		{"one at a time", 10, func(rows []receipts.Row) receipts.Result { return receipts.Verify(slices.Values(rows)) }},
		{"prepared on four goroutines", 300, func(rows []receipts.Row) receipts.Result {
			pre := make([]receipts.PreparedRow, len(rows))
			receipts.PrepareAll(rows, pre, 4)
			v := receipts.NewVerifier()
			for i, r := range rows {
				if !v.AddPrepared(r, pre[i]) {
					break
				}
			}
			return v.Result()
		}},
	}
	for _, c := range cases {
		for _, way := range ways {
			t.Run(c.name+"/"+way.name, func(t *testing.T) {
				t.Parallel()
				rows := c.change(t, chainOf(t, way.n))
				res := way.verify(rows)
				if c.badSeq == 0 {
					if !res.OK || res.Checked != int64(len(rows)) || res.HeadHash != hex.EncodeToString(rows[len(rows)-1].Hash) {
						t.Fatalf("want ok, got %+v", res)
					}
					return
				}
				wantBreak(t, res, c.badSeq, c.because)
			})
		}
	}
}

func TestVerify_EmptyChainIsOKAtTheGenesisHash(t *testing.T) {
	t.Parallel()
	res := receipts.Verify(slices.Values([]receipts.Row(nil)))
	if !res.OK || res.Checked != 0 || res.HeadSeq != 0 || res.HeadHash != strings.Repeat("0", 64) {
		t.Fatalf("%+v", res)
	}
}

func TestVerifier_ExpectedCheckpoint(t *testing.T) {
	t.Parallel()
	rows := chainOf(t, 5)
	for _, c := range []struct {
		name   string
		seq    int64
		hash   []byte
		rows   []receipts.Row
		badSeq int64
	}{
		{"the head", 5, rows[4].Hash, rows, 0},
		{"an earlier seq", 3, rows[2].Hash, rows, 0},
		{"the empty chain", 0, receipts.GenesisHash, rows, 0},
		{"another hash", 3, rows[1].Hash, rows, 3},
		{"a chain that ends before it", 5, rows[4].Hash, rows[:3], 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := receipts.NewVerifier()
			v.Expect(c.seq, c.hash)
			for _, r := range c.rows {
				v.Add(r)
			}
			res := v.Result()
			if (c.badSeq == 0) != res.OK || res.FirstBadSeq != c.badSeq {
				t.Fatalf("%+v; want first bad seq %d", res, c.badSeq)
			}
		})
	}
}

func TestCheckpoint_SignedBytesAndSignature(t *testing.T) {
	t.Parallel()
	seed := make([]byte, ed25519.SeedSize)
	signer := receipts.NewSigner(ed25519.NewKeyFromSeed(seed))
	ws := uuid.MustParse("6f1c0a9e-4b5d-4c7e-8f9a-0b1c2d3e4f5a")
	head := sha256.Sum256([]byte("head"))
	cp, err := signer.Sign(ws, 42, head[:], time.Date(2026, 11, 22, 6, 41, 27, 999, time.FixedZone("x", 3600)))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := cp.SignedBytes()
	want := `{"head_hash":"` + hex.EncodeToString(head[:]) + `","seq":42,"time":"2026-11-22T05:41:27Z","type":"gatehouse.receipts.checkpoint.v1","workspace_id":"6f1c0a9e-4b5d-4c7e-8f9a-0b1c2d3e4f5a"}`
	if string(msg) != want {
		t.Fatalf("signed bytes\n%s\nwant\n%s", msg, want)
	}
	pub := signer.PublicKey()
	if err := receipts.VerifyCheckpoint(pub, cp); err != nil {
		t.Fatal(err)
	}
	if cp.KeyID != receipts.KeyID(pub) || len(cp.KeyID) != 16 {
		t.Fatalf("key id %q", cp.KeyID)
	}
	for name, change := range map[string]func(*receipts.SignedCheckpoint){
		"seq":       func(c *receipts.SignedCheckpoint) { c.Seq++ },
		"head_hash": func(c *receipts.SignedCheckpoint) { c.HeadHash = strings.Repeat("ab", 32) },
		"time":      func(c *receipts.SignedCheckpoint) { c.Time = "2026-11-22T05:41:28Z" },
		"workspace": func(c *receipts.SignedCheckpoint) { c.WorkspaceID = uuid.NewString() },
		"key_id":    func(c *receipts.SignedCheckpoint) { c.KeyID = "0000000000000000" },
		"signature": func(c *receipts.SignedCheckpoint) { c.Signature = c.Signature[:10] },
	} {
		bad := cp
		change(&bad)
		if err := receipts.VerifyCheckpoint(pub, bad); err == nil {
			t.Errorf("a checkpoint with another %s verified", name)
		}
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if err := receipts.VerifyCheckpoint(other.Public().(ed25519.PublicKey), cp); err == nil {
		t.Error("verified with another key")
	}
	// The public key reads back in every form an auditor may have saved.
	info := receipts.NewService(nil).WithSigner(signer)
	pk, _ := info.PublicKey()
	doc, _ := json.Marshal(map[string]string{"public_key": "ignored", "key_id": pk.KeyID})
	for name, form := range map[string]string{
		"pem":    pk.PEM,
		"base64": "  " + base64Std(pk.Raw) + "\n",
		"json":   strings.Replace(string(doc), "ignored", base64Std(pk.Raw), 1),
	} {
		got, err := receipts.ParsePublicKey([]byte(form))
		if err != nil || !got.Equal(pub) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := receipts.ParsePublicKey([]byte("not a key")); err == nil {
		t.Error("a non-key parsed")
	}
}

// wantBreak fails t unless res is a chain broken at seq badSeq for a
// reason that says because, with the receipts before it verified.
func wantBreak(t *testing.T, res receipts.Result, badSeq int64, because string) {
	t.Helper()
	if res.OK || res.FirstBadSeq != badSeq || !strings.Contains(res.Reason, because) {
		t.Fatalf("got %+v; want first_bad_seq %d, a reason with %q", res, badSeq, because)
	}
	if res.Checked != badSeq-1 || res.HeadSeq != badSeq-1 {
		t.Fatalf("checked %d, head %d; want the %d receipts before the break", res.Checked, res.HeadSeq, badSeq-1)
	}
}
