package web

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/oauth"
	"github.com/gatehouse/gatehouse/views"
)

// MCP authorization (OAuth 2.1; see internal/oauth and docs/mcp.md): the
// metadata documents, client registration and the token endpoint are
// public and answer any origin (browser-based MCP clients discover and
// register from their own page); the authorization endpoint is a page
// for a signed-in person, with the browser's protections.

// oauthRoutes registers the authorization server's routes.
func (s *Server) oauthRoutes(e *echo.Echo) {
	cors := middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins: []string{"*"},
		AllowMethods: []string{http.MethodGet, http.MethodPost},
		AllowHeaders: []string{echo.HeaderContentType, echo.HeaderAuthorization, "MCP-Protocol-Version"},
		MaxAge:       3600,
	})
	getOrPreflight := []string{http.MethodGet, http.MethodOptions}
	postOrPreflight := []string{http.MethodPost, http.MethodOptions}
	e.Match(getOrPreflight, oauth.ResourceMetadataPath, s.protectedResourceMetadata, cors)
	e.Match(getOrPreflight, "/.well-known/oauth-protected-resource", s.protectedResourceMetadata, cors)
	e.Match(getOrPreflight, "/.well-known/oauth-authorization-server", s.authServerMetadata, cors)
	e.Match(postOrPreflight, oauth.RegisterPath, s.registerOAuthClient, noStore, cors)
	e.Match(postOrPreflight, oauth.TokenPath, s.oauthToken, noStore, cors)
	csrf := middleware.CSRFWithConfig(s.csrfConfig())
	signedIn := []echo.MiddlewareFunc{noStore, s.oneCredential, s.loadSession, csrf, s.requireUser}
	e.GET(oauth.AuthorizePath, s.authorizePage, signedIn...)
	e.POST(oauth.AuthorizePath, s.authorizeDecision, signedIn...)
}

// oauthService is the authorization server on the server's pool (it keeps
// no state of its own).
func (s *Server) oauthService() *oauth.Service { return oauth.NewService(s.pool, s.auth) }

// oauthSite is this server as its clients know it: GATEHOUSE_PUBLIC_URL
// when it is set (behind a proxy whose Host differs, or reached under
// several names), else the origin the request reached. The origin is the
// issuer, its /mcp the resource tokens are bound to.
func (s *Server) oauthSite(c echo.Context) oauth.Site {
	if s.cfg.IssuerURL != "" {
		return oauth.SiteAt(s.cfg.IssuerURL)
	}
	return oauth.SiteAt(c.Scheme() + "://" + c.Request().Host)
}

// bearerChallenge is the WWW-Authenticate of a 401 to a bearer-token
// caller (RFC 6750 §3): error="invalid_token" when a token was sent, and
// on /mcp the protected resource metadata that starts an MCP client's
// authorization (RFC 9728 §5.1).
func (s *Server) bearerChallenge(c echo.Context) string {
	ch := `Bearer realm="gatehouse"`
	if hasBearer(c) {
		ch += `, error="invalid_token"`
	}
	if isMCP(c) {
		quote := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
		ch += `, resource_metadata="` + quote.Replace(s.oauthSite(c).ResourceMetadataURL()) + `"`
	}
	return ch
}

// audienceAllowed reports whether a token bound to audience (an OAuth
// grant's, RFC 8707) may be used on this request: only at the resource
// it was issued for, this server's /mcp. Unbound tokens may go anywhere
// tokens go.
func (s *Server) audienceAllowed(c echo.Context, audience string) bool {
	return audience == "" || (isMCP(c) && oauth.SameResource(audience, s.oauthSite(c).Resource))
}

// protectedResourceMetadata handles "GET /.well-known/oauth-protected-resource/mcp"
// (and the same at the root): /mcp's protected resource metadata (RFC 9728).
func (s *Server) protectedResourceMetadata(c echo.Context) error {
	site := s.oauthSite(c)
	return c.JSON(http.StatusOK, oauthex.ProtectedResourceMetadata{
		Resource:               site.Resource,
		AuthorizationServers:   []string{site.Issuer},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Gatehouse MCP",
	})
}

// authServerMetadata handles "GET /.well-known/oauth-authorization-server":
// the authorization server's metadata (RFC 8414).
func (s *Server) authServerMetadata(c echo.Context) error {
	site := s.oauthSite(c)
	b, err := json.Marshal(oauthex.AuthServerMeta{
		Issuer:                                     site.Issuer,
		AuthorizationEndpoint:                      site.Issuer + oauth.AuthorizePath,
		TokenEndpoint:                              site.Issuer + oauth.TokenPath,
		RegistrationEndpoint:                       site.Issuer + oauth.RegisterPath,
		ResponseTypesSupported:                     []string{"code"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported:          []string{"none"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		ScopesSupported:                            []string{"mcp", "mcp:read"},
		AuthorizationResponseIssParameterSupported: true,
	})
	if err != nil {
		return err
	}
	// The SDK's type always writes jwks_uri; there is none (no signed
	// tokens), so it is left out rather than sent empty.
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	delete(doc, "jwks_uri")
	return c.JSON(http.StatusOK, doc)
}

// oauthError answers a registration or token request with an OAuth error
// (RFC 6749 §5.2, RFC 7591 §3.2.2): JSON, never stored.
func oauthError(c echo.Context, e *oauth.Error) error {
	h := c.Response().Header()
	h.Set(echo.HeaderCacheControl, "no-store")
	h.Set("Pragma", "no-cache")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	return c.JSON(e.Status, map[string]string{"error": e.Code, "error_description": e.Description})
}

// registerOAuthClient handles "POST /oauth/register": dynamic client
// registration (RFC 7591) of a public client. 201 with the client's id;
// 400 with invalid_redirect_uri or invalid_client_metadata, writing
// nothing; 429 past the registration brake.
func (s *Server) registerOAuthClient(c echo.Context) error {
	req := c.Request()
	if media, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); media != echo.MIMEApplicationJSON {
		return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidClientMetadata, Status: http.StatusBadRequest, Description: "Send the client metadata as application/json."})
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, oauth.MaxRegistration+1))
	if err != nil {
		return err
	}
	if len(body) > oauth.MaxRegistration {
		return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidClientMetadata, Status: http.StatusBadRequest, Description: "The client metadata may have at most 16 KiB."})
	}
	var meta oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal(body, &meta); err != nil {
		return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidClientMetadata, Status: http.StatusBadRequest,
			Description: "The client metadata must be a JSON object whose fields have the types RFC 7591 gives them."})
	}
	resp, err := s.oauthService().Register(req.Context(), meta, c.RealIP(), time.Now())
	if oe, ok := errors.AsType[*oauth.Error](err); ok {
		return oauthError(c, oe)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, &resp)
}

// oauthToken handles "POST /oauth/token": the authorization code grant
// (with its PKCE verifier) and refresh (which rotates the refresh token).
// Errors are RFC 6749 §5.2's JSON.
func (s *Server) oauthToken(c echo.Context) error {
	req := c.Request()
	if media, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); media != echo.MIMEApplicationForm {
		return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidRequest, Status: http.StatusBadRequest, Description: "Send the token request as application/x-www-form-urlencoded."})
	}
	if err := req.ParseForm(); err != nil {
		return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidRequest, Status: http.StatusBadRequest, Description: "The form is malformed."})
	}
	form := req.PostForm // the body only, never the URL's query
	for name, vs := range form {
		if len(vs) > 1 {
			return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidRequest, Status: http.StatusBadRequest, Description: name + " is sent more than once."})
		}
	}
	tr := oauth.TokenRequest{
		GrantType: form.Get("grant_type"), ClientID: form.Get("client_id"), Code: form.Get("code"), RedirectURI: form.Get("redirect_uri"),
		CodeVerifier: form.Get("code_verifier"), RefreshToken: form.Get("refresh_token"), Resource: form.Get("resource"),
	}
	// A public client may still name itself in HTTP Basic (RFC 6749
	// §2.3.1: the id form-encoded), with an empty password.
	if user, _, ok := req.BasicAuth(); ok {
		id, err := url.QueryUnescape(user)
		if err != nil || (tr.ClientID != "" && tr.ClientID != id) {
			return oauthError(c, &oauth.Error{Code: oauth.ErrInvalidRequest, Status: http.StatusBadRequest, Description: "The client is named twice, differently."})
		}
		tr.ClientID = id
	}
	resp, err := s.oauthService().Token(req.Context(), s.oauthSite(c), tr, time.Now())
	if oe, ok := errors.AsType[*oauth.Error](err); ok {
		return oauthError(c, oe)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Pragma", "no-cache")
	return c.JSON(http.StatusOK, resp)
}

// authorizePage handles "GET /oauth/authorize": the consent page of an
// authorization request, for the signed-in person (others sign in first
// and come back here). An unknown client or an unregistered redirect URI
// is an error page, never a redirect; any other fault goes back to the
// client's redirect URI with its error.
func (s *Server) authorizePage(c echo.Context) error {
	p, err := s.oauthService().CheckRequest(c.Request().Context(), s.oauthSite(c), oauth.ParseRequest(c.QueryParams()))
	if oe, ok := errors.AsType[*oauth.Error](err); ok {
		return c.Redirect(http.StatusSeeOther, p.ErrorRedirect(oe))
	}
	if err != nil {
		return err
	}
	return s.renderConsent(c, http.StatusOK, p, views.OAuthConsentForm{Target: "new", Access: "all"}, nil)
}

// authorizeDecision handles "POST /oauth/authorize" (the consent form:
// the request's parameters, target, access and decision). Allow issues
// a code and sends the person back to the client with it; Deny sends
// them back with access_denied. The request is checked again as on GET.
func (s *Server) authorizeDecision(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	svc := s.oauthService()
	p, err := svc.CheckRequest(ctx, s.oauthSite(c), oauth.ParseRequest(values))
	if oe, ok := errors.AsType[*oauth.Error](err); ok {
		return c.Redirect(http.StatusSeeOther, p.ErrorRedirect(oe))
	}
	if err != nil {
		return err
	}
	form := views.OAuthConsentForm{Target: values.Get("target"), Access: values.Get("access")}
	switch values.Get("decision") {
	case "deny":
		return c.Redirect(http.StatusSeeOther, p.Deny())
	case "approve":
	default:
		return s.renderConsent(c, http.StatusUnprocessableEntity, p, form, map[string]string{"decision": "Choose Allow or Deny."})
	}
	consent, fields, err := s.consentOf(c, form)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		return s.renderConsent(c, http.StatusUnprocessableEntity, p, form, fields)
	}
	redirect, err := svc.Approve(ctx, principal(c), p, consent, time.Now())
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, redirect)
}

// consentOf reads the person's choices; the conversation or notebook must
// be their own. Fields name what cannot be read.
func (s *Server) consentOf(c echo.Context, form views.OAuthConsentForm) (oauth.Consent, map[string]string, error) {
	fields := map[string]string{}
	var consent oauth.Consent
	switch form.Access {
	case "all":
	case "read":
		consent.ReadOnly = true
	default:
		fields["access"] = "Choose every tool or read-only."
	}
	ctx, p := c.Request().Context(), principal(c)
	kind, rawID, _ := strings.Cut(form.Target, ":")
	id, idErr := uuid.Parse(rawID)
	var err error
	switch {
	case form.Target == "new" || form.Target == "":
	case kind == "conversation" && idErr == nil:
		_, err = s.convs.Get(ctx, p, id)
		consent.Conversation = id
	case kind == "notebook" && idErr == nil:
		_, err = s.nbs.Get(ctx, p, id)
		consent.Notebook = id
	default:
		err = apperr.Errorf(apperr.ENOTFOUND, "")
	}
	if apperr.Code(err) == apperr.ENOTFOUND {
		fields["target"] = "Choose one of your conversations or notebooks, or a new conversation."
		err = nil
	}
	return consent, fields, err
}

// renderConsent renders the consent page. Its Content-Security-Policy
// lets the form's answer go on to the client's redirect URI (form-action
// holds for the redirect after a submission too).
func (s *Server) renderConsent(c echo.Context, status int, p oauth.Pending, form views.OAuthConsentForm, fields map[string]string) error {
	ctx, who := c.Request().Context(), principal(c)
	v := views.OAuthConsentView{ClientName: p.Client.Name, RedirectHost: p.RedirectHost(), Resource: p.Resource, Form: form, Fields: fields}
	if v.Resource == "" {
		v.Resource = s.oauthSite(c).Resource
	}
	params := p.Request.Values()
	for _, name := range []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "resource", "scope"} {
		if val := params.Get(name); val != "" {
			v.Params = append(v.Params, views.OAuthParam{Name: name, Value: val})
		}
	}
	convs, err := s.convs.List(ctx, who, conversations.ListPage{Limit: consentChoices})
	if err != nil {
		return err
	}
	for _, cv := range convs.Conversations {
		v.Conversations = append(v.Conversations, views.OAuthChoice{Value: "conversation:" + cv.ID.String(), Title: cv.Title})
	}
	nbs, err := s.nbs.List(ctx, who)
	if err != nil {
		return err
	}
	for i, nb := range nbs {
		if i == consentChoices {
			break
		}
		v.Notebooks = append(v.Notebooks, views.OAuthChoice{Value: "notebook:" + nb.ID.String(), Title: nb.Title})
	}
	h := c.Response().Header()
	if origin := oauth.RedirectOrigin(p.Request.RedirectURI); origin != "" {
		h.Set(echo.HeaderContentSecurityPolicy, strings.Replace(h.Get(echo.HeaderContentSecurityPolicy), "form-action 'self'", "form-action 'self' "+origin, 1))
	}
	return render(c, status, views.OAuthConsentPage(s.shell(c, "Connect an application", ""), v))
}

// consentChoices is how many of the person's most recent conversations,
// and notebooks, the consent page offers.
const consentChoices = 50
