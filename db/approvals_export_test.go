package db

// The approvals queue's statements, for the test that checks their plans
// read through indexes (migration 29).
const (
	ListPendingApprovalsPageSQL   = listPendingApprovalsPage
	ListApprovalsPageByStatusSQL  = listApprovalsPageByStatus
	ListApprovalsPageAnyStatusSQL = listApprovalsPageAnyStatus
	ListApprovalsByIDSQL          = listApprovalsByID
	CountApprovalsSQL             = countApprovals
	CountPendingApprovalsSQL      = countPendingApprovals
	ListSimilarProposalsSQL       = listSimilarProposals
)
