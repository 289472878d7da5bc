package receipts_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/receipts"
)

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func ecdsaPEM(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func TestLoadOrCreateKey_GeneratesWithMode0600ThenReuses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fresh", "receipt-signing.key")
	key, created, err := receipts.LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first load: created %v, %v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Fatalf("folder mode %v, want 0700", di.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("not a PEM PKCS#8 key:\n%s", b)
	}
	again, created, err := receipts.LoadOrCreateKey(path)
	if err != nil || created || !again.Equal(key) {
		t.Fatalf("second load: created %v, same %v, %v", created, again.Equal(key), err)
	}
}

func TestLoadOrCreateKey_ABadFileIsAClearError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":      "",
		"not pem":    "hello",
		"public key": "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n",
		"garbage":    "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		// A PKCS#8 key, but not an Ed25519 one.
		"ecdsa": ecdsaPEM(t),
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := receipts.LoadOrCreateKey(path)
		if err == nil || !strings.Contains(err.Error(), "receipt signing key "+path) {
			t.Errorf("%s: %v", name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("%s: the bad file was overwritten", name)
		}
	}
}
