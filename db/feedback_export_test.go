package db

// The feedback triage list's statements, for the test that checks their
// plans read an index range, not every item (migration 36).
const (
	ListFeedbackPageSQL = listFeedbackPage
	CountFeedbackSQL    = countFeedback
)
