package receipts

// ChainHashOf is ChainHash through the general canonical form.
func ChainHashOf(receiptID string, seq int64, prevHash, contentHash []byte, metadata []byte) ([]byte, error) {
	return chainHashOf(link{ReceiptID: receiptID, Seq: seq, PrevHash: Hex(prevHash), ContentHash: Hex(contentHash), Metadata: metadata})
}

// WithVerifyPage returns the service reading n receipts a page, so a short
// chain takes several pages.
func (s *Service) WithVerifyPage(n int) *Service {
	out := *s
	out.verifyPage = n
	return &out
}
