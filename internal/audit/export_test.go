package audit

// SetFirstWindow makes a member's page read windows of n ids first, until
// the test ends.
func SetFirstWindow(n int64) (restore func()) {
	was := firstWindow
	firstWindow = n
	return func() { firstWindow = was }
}
