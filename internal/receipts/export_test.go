package receipts

// For tests that hold a workspace's sequencer lock as another instance would.
var (
	LockClass       = lockClass
	ChainLockObject = chainLockObject
)
