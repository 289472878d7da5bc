package web

import (
	"net"
	"net/http"
	"net/netip"
	"slices"

	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// routes is every route of the application, in one place.
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = clientAddress(s.cfg.TrustedProxies)

	e.Use(middleware.RequestID())
	e.Use(s.recoverPanics)
	e.Use(s.logRequests)
	e.Use(echoprometheus.NewMiddlewareWithConfig(echoprometheus.MiddlewareConfig{
		Registerer: s.metrics,
		Skipper:    func(c echo.Context) bool { return c.Path() == "/metrics" },
	}))
	e.Use(middleware.BodyLimit("1M"))
	e.Use(s.checkInput)
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection:         "0",
		ContentTypeNosniff:    "nosniff",
		XFrameOptions:         "DENY",
		ReferrerPolicy:        "same-origin",
		ContentSecurityPolicy: "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
		HSTSMaxAge:            31536000,
	}))

	// Operations.
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echoprometheus.NewHandlerWithConfig(echoprometheus.HandlerConfig{Gatherer: s.metrics}))
	e.StaticFS("/static", staticFiles())
	e.GET("/favicon.ico", s.favicon)

	// REST API: bearer tokens, requests validated against openapi.yaml.
	e.GET("/api/v1/openapi.yaml", s.openAPIDocument)
	e.GET("/schemas/:name", s.jsonSchema) // the Trust Graduation Protocol's JSON Schemas, each at its $id (tgp.go)
	api := e.Group("/api/v1", s.requireToken, s.validateAPIRequest)
	api.GET("/me", s.apiMe)
	api.GET("/tools", s.apiListTools)
	api.GET("/tools/:name/cheatsheet", s.apiToolCheatsheet)
	api.POST("/conversations", s.apiCreateConversation)
	api.GET("/conversations", s.apiListConversations)
	api.GET("/conversations/:id", s.apiGetConversation)
	api.PATCH("/conversations/:id", s.apiUpdateConversation)
	api.GET("/conversations/:id/preview", s.apiConversationPreview)
	api.POST("/conversations/:id/messages", s.apiPostMessage)
	api.GET("/conversations/:id/messages", s.apiListMessages)
	api.POST("/conversations/:id/tool-calls", s.apiProposeInConversation)
	api.GET("/conversations/:id/turns/:turn_id", s.apiGetTurn)
	api.POST("/conversations/:id/turns/:turn_id/stop", s.apiStopTurn)
	api.POST("/notebooks", s.apiCreateNotebook)
	api.GET("/notebooks", s.apiListNotebooks)
	api.GET("/notebooks/:id", s.apiGetNotebook)
	api.PATCH("/notebooks/:id", s.apiUpdateNotebook)
	api.GET("/notebooks/:id/preview", s.apiNotebookPreview)
	api.GET("/notebooks/:id/cells", s.apiListCells)
	api.POST("/notebooks/:id/tool-calls", s.apiProposeInNotebook)
	api.POST("/decisions", s.apiDecide)
	api.GET("/proposals/:id", s.apiGetProposal)
	api.POST("/proposals/:id/apply", s.apiApplyProposal)
	api.POST("/proposals/:id/reject", s.apiRejectProposal)
	api.POST("/proposals/:id/performed", s.apiPerformProposal)
	api.POST("/proposals/:id/outcome", s.apiReportOutcome)
	api.POST("/evidence", s.apiRecordEvidence)
	api.POST("/feedback", s.apiSubmitFeedback)
	api.POST("/receipts/:id/violation", s.apiFlagViolation)
	api.GET("/violations", s.apiListViolations)
	api.POST("/violations/:id/clear", s.apiClearViolation)
	api.GET("/action-classes", s.apiListActionClasses)
	api.GET("/action-classes/:class/posterior", s.apiGetPosterior)
	api.PUT("/action-classes/:class/threshold", s.apiSetThreshold)
	// Receipts: verify and checkpoint with any user token, export and read
	// with approvers' and admins', redact with admins'.
	api.GET("/receipts", s.apiExportReceipts)
	api.GET("/receipts/verify", s.apiVerifyReceipts)
	api.POST("/receipts/verifications", s.apiStartVerification)
	api.GET("/receipts/verifications/:id", s.apiGetVerification)
	api.GET("/receipts/checkpoint", s.apiReceiptCheckpoint)
	api.GET("/receipts/public-key", s.apiReceiptPublicKey)
	api.GET("/receipts/:id", s.apiGetReceipt)
	api.POST("/receipts/:id/redact", s.apiRedactReceipt)

	// MCP (Streamable HTTP): agents connect with their token; every
	// tools/call is proposed in the session's conversation or notebook.
	if s.gateway != nil {
		e.Match([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, "/mcp", s.mcpEndpoint, noStore, s.mcpOrigin, s.requireToken)
	}

	// Browser pages: cookie sessions and CSRF on every one.
	csrf := middleware.CSRFWithConfig(s.csrfConfig())
	// Signed-in pages and their error pages are never stored by a cache. A
	// request with a bearer token and a session cookie is refused; one with
	// only a bearer token gets no exemption from CSRF here (bearerOr is the
	// one way in by token).
	session := []echo.MiddlewareFunc{noStore, s.oneCredential, s.loadSession, csrf}
	signedIn := slices.Concat(session, []echo.MiddlewareFunc{s.requireUser})
	approver := slices.Concat(signedIn, []echo.MiddlewareFunc{s.requireApprover})

	e.GET("/signin", s.signInPage, session...)
	e.POST("/signin", s.signIn, session...)
	e.POST("/signout", s.signOut, session...)
	e.GET("/", s.homePage, signedIn...)
	// Live pages: each page's event stream (authorised like the page) and
	// the fragment its feed re-renders from the database.
	e.GET("/events", s.homeEvents, signedIn...)
	e.GET("/home/live", s.homeLive, signedIn...)
	e.GET("/audit", s.auditPage, signedIn...)
	e.GET("/tools", s.toolsPage, signedIn...)
	s.grantRoutes(e) // grants ("allow similar"): /grants, the scope header's count, revoke, and /api/v1/grants
	e.GET("/conversations", s.conversationsPage, signedIn...)
	e.POST("/conversations", s.createConversation, signedIn...)
	e.GET("/conversations/:id", s.conversationPage, signedIn...)
	e.POST("/conversations/:id/mode", s.setPermissionMode, signedIn...)
	e.POST("/conversations/:id/environment", s.setConversationEnvironment, signedIn...)
	e.GET("/conversations/:id/preview", s.conversationPreview, signedIn...)
	e.POST("/conversations/:id/messages", s.postMessage, signedIn...)
	e.GET("/conversations/:id/events", s.conversationEvents, signedIn...)
	e.GET("/conversations/:id/transcript", s.conversationTranscript, signedIn...)
	// Chat with a model: the panel (refreshed on the conversation's
	// events), stop, settings.
	e.GET("/conversations/:id/chat", s.chatPanel, signedIn...)
	e.POST("/conversations/:id/chat/stop", s.stopChat, signedIn...)
	e.POST("/conversations/:id/chat/settings", s.saveChatSettings, signedIn...)
	e.GET("/notebooks", s.notebooksPage, signedIn...)
	e.POST("/notebooks", s.createNotebook, signedIn...)
	e.GET("/notebooks/:id", s.notebookPage, signedIn...)
	e.POST("/notebooks/:id/trust", s.setTrustLevel, signedIn...)
	e.POST("/notebooks/:id/environment", s.setNotebookEnvironment, signedIn...)
	e.GET("/notebooks/:id/preview", s.notebookPreview, signedIn...)
	e.GET("/notebooks/:id/cell-fields", s.cellFields, signedIn...)
	e.POST("/notebooks/:id/cells", s.addCell, signedIn...)
	e.GET("/notebooks/:id/cells", s.newCells, signedIn...)
	e.GET("/notebooks/:id/events", s.notebookEvents, signedIn...)
	e.GET("/proposals/:id/card", s.proposalCard, signedIn...)
	e.POST("/proposals/:id/apply", s.applyProposal, signedIn...)
	e.POST("/proposals/:id/reject", s.rejectProposal, signedIn...)
	e.POST("/proposals/:id/performed", s.performProposal, signedIn...)
	e.GET("/tokens", s.tokensPage, signedIn...)
	e.POST("/tokens", s.createToken, signedIn...)
	e.POST("/tokens/:id/revoke", s.revokeToken, signedIn...)
	s.oauthRoutes(e)            // MCP authorization (OAuth 2.1): metadata, registration, consent, tokens
	s.notifyRoutes(e, signedIn) // notification settings, and the page a notification's one-time link opens
	e.GET("/trust", s.trustPage, signedIn...)
	e.POST("/trust/thresholds", s.setTrustThreshold, signedIn...)
	e.POST("/trust/violations/:id/clear", s.clearViolation, signedIn...)
	e.GET("/admin", s.adminPage, approver...)
	e.GET("/admin/settings", s.settingsPage, approver...)
	e.GET("/admin/outbox", s.outboxPage, approver...)
	e.GET("/admin/receipts", s.receiptsPage, approver...)
	e.GET("/admin/receipts/:id/content", s.receiptContent, approver...)
	e.GET("/admin/receipts/verify", s.verifyReceiptsNow, approver...)
	e.GET("/admin/receipts/verifications/:id", s.receiptVerificationFragment, approver...)
	e.POST("/admin/settings", s.saveSettings, approver...)
	e.GET("/admin/settings/preview", s.settingsPreview, approver...)
	e.GET("/admin/policy", s.policyPage, approver...)
	e.GET("/admin/policy/replay", s.replayPage, approver...)
	e.POST("/admin/policy/replay", s.runReplay, approver...)
	e.POST("/admin/approver-roles", s.grantApproverRole, approver...)
	e.POST("/admin/approver-roles/revoke", s.revokeApproverRole, approver...)
	e.GET("/admin/upstreams", s.upstreamsPage, approver...)
	e.POST("/admin/upstreams/:upstream/refresh", s.refreshUpstream, approver...)
	e.POST("/admin/upstreams/:upstream/tools/:tool/accept", s.acceptUpstreamTool, approver...)
	// Agent feedback: approvers and admins triage it in a session, or read
	// its JSON with a user token.
	approverOrToken := []echo.MiddlewareFunc{noStore, s.oneCredential, s.bearerOr(signedIn), s.requireApprover}
	e.GET("/admin/feedback", s.feedbackPage, approverOrToken...)
	e.GET("/admin/feedback.csv", s.feedbackCSV, approverOrToken...)
	e.POST("/admin/feedback/:id/status", s.setFeedbackStatus, approver...)
	// What agents are trying to do: their calls' rationales (admins).
	e.GET("/admin/intent", s.intentPage, approverOrToken...)
	// The approvals queue: approvers, admins and holders of a named
	// approver role (the service shows each the packets they may resolve),
	// in a session, or with a user token for its JSON.
	resolver := slices.Concat(signedIn, []echo.MiddlewareFunc{s.requireResolver})
	resolverOrToken := []echo.MiddlewareFunc{noStore, s.oneCredential, s.bearerOr(signedIn), s.requireResolver}
	e.GET("/admin/approvals", s.approvalsQueue, resolverOrToken...)
	e.GET("/admin/approvals/events", s.streamEvents, resolver...)
	e.POST("/admin/approvals/bulk", s.bulkApprovals, resolver...)
	e.POST("/admin/proposals/:id/settle", s.settleStuck, approver...)
	e.GET("/admin/approvals/:id", s.approvalDetail, resolverOrToken...)
	e.POST("/admin/approvals/:id/approve", s.approveApproval, resolverOrToken...)
	e.POST("/admin/approvals/:id/reject", s.rejectApproval, resolverOrToken...)
	return e
}

// clientAddress finds the client's address (for the sign-in brake and
// logs). X-Forwarded-For is believed only from the configured proxies, read
// from the right up to the first address that is not one of them, so a
// client cannot choose its own address; with none configured, the header
// is ignored.
func clientAddress(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		p = p.Masked()
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
