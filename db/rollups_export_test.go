package db

// The /trust and /admin/intent statements, for the test that checks
// their plans read aggregates and indexes, not history (migration 30).
const (
	EvidenceTotalsSQL    = evidenceTotals
	LatestEvidenceSQL    = latestEvidence
	CallDaysSQL          = callDays
	CallDecisionsSQL     = callDecisions
	AuditBatchEndSQL     = auditBatchEnd
	CallEventsSQL        = callEvents
	IntentCallsSQL       = intentCalls
	IntentWordMatchesSQL = intentWordMatches
)
