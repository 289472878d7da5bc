package receipts

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Checkpoints. The server signs a workspace's head with an Ed25519 key held
// outside the database. The signed bytes are
//
//	JCS({"type": "gatehouse.receipts.checkpoint.v1", "workspace_id": W,
//	     "seq": S, "head_hash": H, "time": T})
//
// with W the workspace id (lowercase UUID string), S the head's seq (a JSON
// number; 0 for an empty chain), H its hash (lowercase hex; 64 zeros for an
// empty chain) and T the signing time (RFC 3339, UTC, whole seconds). The
// signature is plain Ed25519 (RFC 8032, not prehashed) over those bytes,
// sent in standard base64. An auditor who saved a checkpoint can later
// prove that the chain still extends it: someone who rewrote history with
// database access cannot sign a new checkpoint.

// CheckpointType separates checkpoint signatures from anything else the
// key might ever sign.
const CheckpointType = "gatehouse.receipts.checkpoint.v1"

// Checkpoint is a workspace's chain head at a time.
type Checkpoint struct {
	WorkspaceID string `json:"workspace_id"`
	Seq         int64  `json:"seq"`
	HeadHash    string `json:"head_hash"`
	Time        string `json:"time"`
}

// SignedCheckpoint is a checkpoint, its signature and the signing key's id.
type SignedCheckpoint struct {
	Checkpoint
	Signature string `json:"signature"`
	KeyID     string `json:"key_id"`
}

// SignedBytes are the exact bytes a checkpoint's signature covers.
func (c Checkpoint) SignedBytes() ([]byte, error) {
	return Canonical(struct {
		Type string `json:"type"`
		Checkpoint
	}{CheckpointType, c})
}

// Valid checks the checkpoint's fields are well formed.
func (c Checkpoint) Valid() error {
	if _, err := uuid.Parse(c.WorkspaceID); err != nil {
		return errors.New("workspace_id is not a UUID")
	}
	if c.Seq < 0 {
		return errors.New("seq is negative")
	}
	if h, err := hex.DecodeString(c.HeadHash); err != nil || len(h) != HashSize || strings.ToLower(c.HeadHash) != c.HeadHash {
		return errors.New("head_hash is not 64 lowercase hex digits")
	}
	if c.Seq == 0 && c.HeadHash != hex.EncodeToString(GenesisHash) {
		return errors.New("an empty chain's head_hash is 64 zeros")
	}
	if _, err := time.Parse(time.RFC3339, c.Time); err != nil {
		return errors.New("time is not RFC 3339")
	}
	return nil
}

// HeadHashBytes is the head hash as bytes (nil when malformed).
func (c Checkpoint) HeadHashBytes() []byte {
	h, err := hex.DecodeString(c.HeadHash)
	if err != nil || len(h) != HashSize {
		return nil
	}
	return h
}

// KeyID names a public key: the first 8 bytes of sha256(raw 32-byte key),
// as 16 lowercase hex digits.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signer signs checkpoints with the server's key.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// NewSigner returns a signer for key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}
}

// KeyID is the id of the signer's public key.
func (s *Signer) KeyID() string { return s.id }

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign signs a workspace's head at now.
func (s *Signer) Sign(workspaceID uuid.UUID, seq int64, headHash []byte, now time.Time) (SignedCheckpoint, error) {
	c := Checkpoint{WorkspaceID: workspaceID.String(), Seq: seq, HeadHash: hex.EncodeToString(headHash), Time: now.UTC().Truncate(time.Second).Format(time.RFC3339)}
	if err := c.Valid(); err != nil {
		return SignedCheckpoint{}, fmt.Errorf("receipts: checkpoint: %w", err)
	}
	msg, err := c.SignedBytes()
	if err != nil {
		return SignedCheckpoint{}, err
	}
	return SignedCheckpoint{Checkpoint: c, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, msg)), KeyID: s.id}, nil
}

// VerifyCheckpoint checks a checkpoint's form, that it names pub's key,
// and its signature.
func VerifyCheckpoint(pub ed25519.PublicKey, sc SignedCheckpoint) error {
	if err := sc.Valid(); err != nil {
		return fmt.Errorf("the checkpoint is malformed: %w", err)
	}
	if id := KeyID(pub); sc.KeyID != id {
		return fmt.Errorf("the checkpoint was signed with key %q, not with key %q", sc.KeyID, id)
	}
	sig, err := base64.StdEncoding.DecodeString(sc.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return errors.New("the checkpoint's signature is not a base64 Ed25519 signature")
	}
	msg, err := sc.SignedBytes()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return errors.New("the checkpoint's signature does not verify: it was altered or not signed by this key")
	}
	return nil
}

// PublicKeyPEM is pub as a PEM "PUBLIC KEY" (PKIX) block.
func PublicKeyPEM(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // an ed25519 key always marshals
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// ParsePublicKey reads a public key as an auditor saved it: a PEM "PUBLIC
// KEY" block, the standard base64 of the raw 32 bytes, or the JSON that
// GET /api/v1/receipts/public-key answers.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	text := strings.TrimSpace(string(data))
	if strings.HasPrefix(text, "{") {
		var doc struct {
			PublicKey string `json:"public_key"`
		}
		if err := json.Unmarshal([]byte(text), &doc); err != nil || doc.PublicKey == "" {
			return nil, errors.New("a JSON public key needs a public_key field (base64 of the raw key)")
		}
		text = doc.PublicKey
	}
	if block, _ := pem.Decode([]byte(text)); block != nil {
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("a PEM %q block is not a public key", block.Type)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the PEM public key cannot be read: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, errors.New("the PEM public key is not an Ed25519 key")
		}
		return pub, nil
	}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("a public key is a PEM PUBLIC KEY block or the base64 of 32 raw bytes")
	}
	return ed25519.PublicKey(raw), nil
}
