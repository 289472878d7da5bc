package receipts

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The signing key lives in a file outside the database: a PEM "PRIVATE
// KEY" block holding the Ed25519 key in PKCS#8 (what `openssl genpkey
// -algorithm ed25519` writes), mode 0600. It is generated on first start
// and never logged.

// LoadOrCreateKey reads the signing key at path, or generates one there
// (mode 0600, its folder 0700 when created) when the file does not exist,
// and says whether it did. A file that exists but holds no Ed25519 key is
// an error that names it.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, bool, error) {
	key, err := ReadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("receipt signing key: generate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, false, fmt.Errorf("receipt signing key: encode: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("receipt signing key %s: %w", path, err)
	}
	// O_EXCL: when two processes start at once, one writes and both read it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		key, err := ReadKey(path)
		return key, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("receipt signing key %s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		os.Remove(path)
		return nil, false, fmt.Errorf("receipt signing key %s: write: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, false, fmt.Errorf("receipt signing key %s: write: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("receipt signing key %s: write: %w", path, err)
	}
	return key, true, nil
}

// ReadKey reads the signing key at path (see LoadOrCreateKey). A missing
// file is fs.ErrNotExist.
func ReadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("receipt signing key %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("receipt signing key %s: not a PEM \"PRIVATE KEY\" block (want an Ed25519 key in PKCS#8, as `openssl genpkey -algorithm ed25519` writes; remove the file to have a new key generated, which makes earlier checkpoints unverifiable with the new key)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("receipt signing key %s: not a PKCS#8 private key: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("receipt signing key %s: a %T, not an Ed25519 key", path, k)
	}
	return key, nil
}
