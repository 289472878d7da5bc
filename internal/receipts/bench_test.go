package receipts_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/receipts"
)

// BenchmarkContentHash is the cost of sha256(JCS(content)) for a typical
// execution receipt (two decisions with their layers, arguments, a
// rationale), what every receipted outcome pays once.
func BenchmarkContentHash(b *testing.B) {
	c := typicalContent(1)
	c.ReceiptID, c.WorkspaceID, c.Time = uuid.NewString(), uuid.NewString(), time.Now().UTC().Format(time.RFC3339Nano)
	if canonical, err := receipts.Canonical(c); err == nil {
		b.SetBytes(int64(len(canonical)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipts.ContentHash(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepareFresh is what the automatic path pays to encode a
// call's receipt (content and metadata) before writing it.
func BenchmarkPrepareFresh(b *testing.B) {
	c := typicalContent(1)
	ws := uuid.New()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipts.PrepareFresh(ws, c, now); err != nil {
			b.Fatal(err)
		}
	}
}
