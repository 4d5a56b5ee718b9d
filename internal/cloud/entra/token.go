package entra

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// tokenResponse is the v2 endpoint's success body.
type tokenResponse struct {
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	ExtExpiresIn int64  `json:"ext_expires_in"`
	AccessToken  string `json:"access_token"`
}

// token serves POST /{tenant}/oauth2/v2.0/token, client-credentials grant. It never writes to the
// store (except a due signing-key rotation), whatever the input.
func (s *Service) token(r *http.Request) (httpx.Response, error) {
	if r.Method != http.MethodPost {
		return httpx.Response{}, errMethod()
	}
	tid, err := s.tenant(r, "invalid_request")
	if err != nil {
		return httpx.Response{}, err
	}
	if tid == "" {
		return httpx.Response{}, errNoTenant()
	}
	body, err := httpx.ReadBody(r, maxTokenBody)
	if errors.Is(err, httpx.ErrTooLarge) {
		return httpx.Response{}, errTooLarge()
	} else if err != nil {
		return httpx.Response{}, errBadRequest("The request body could not be read.")
	}
	req, ferr := parseTokenForm(r.Header.Get("Content-Type"), body)
	if ferr != nil {
		return httpx.Response{}, ferr
	}
	res, err := s.issue(r.Context(), tid, s.authority(r), req)
	if e := (*Error)(nil); errors.As(err, &e) {
		reqlog.SetReason(r.Context(), fmt.Sprintf("AADSTS%d: %s", e.Code, e.Message))
	}
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: res}, nil
}

// issue validates a parsed token request and signs the access token.
// authority is the origin the request reached Entra ID under (the cloud's own, or a public
// name): it decides the tokens' issuer and the audience a certificate assertion must name.
func (s *Service) issue(ctx context.Context, tid, authority string, req tokenRequest) (tokenResponse, error) {
	switch {
	case req.GrantType == "":
		return tokenResponse{}, errMissingParam("grant_type")
	case req.GrantType != "client_credentials":
		return tokenResponse{}, errGrantType(req.GrantType)
	case req.ClientID == "":
		return tokenResponse{}, errMissingParam("client_id")
	case req.Scope == "":
		return tokenResponse{}, errMissingParam("scope")
	}
	resource, serr := resourceFromScope(req.Scope)
	if serr != nil {
		return tokenResponse{}, serr
	}
	p, err := s.Directory.Principal(ctx, tid, req.ClientID)
	if errors.Is(err, ErrNotFound) {
		return tokenResponse{}, errAppNotFound(req.ClientID, tid)
	} else if err != nil {
		return tokenResponse{}, fmt.Errorf("look up principal: %w", err)
	}
	reqlog.SetPrincipal(ctx, p.ObjectID) // the log names who asked, granted or refused
	var acr string
	switch {
	case req.ClientSecret != "" && req.Assertion != "":
		return tokenResponse{}, errBadRequest("Only one of 'client_secret' and 'client_assertion' may be sent.")
	case req.ClientSecret != "":
		if err := s.checkSecret(p, req.ClientSecret); err != nil {
			return tokenResponse{}, err
		}
		acr = "1"
	case req.Assertion != "":
		if req.AssertionType != assertionTypeJWTBearer {
			return tokenResponse{}, errBadRequest("The 'client_assertion_type' must be '%s'.", assertionTypeJWTBearer)
		}
		if err := s.checkAssertion(ctx, p, authority, req.Assertion); err != nil {
			return tokenResponse{}, err
		}
		acr = "2"
	default:
		return tokenResponse{}, errNoCredential()
	}
	iss := s.Issuer(p.TenantID)
	if authority != s.base {
		iss = azurenames.Issuer(p.TenantID)
	}
	raw, _, err := s.sign(ctx, p, iss, resource, acr)
	if err != nil {
		return tokenResponse{}, err
	}
	in := int64(s.lifetime / time.Second)
	return tokenResponse{TokenType: "Bearer", ExpiresIn: in, ExtExpiresIn: in, AccessToken: raw}, nil
}

func (s *Service) checkSecret(p Principal, secret string) error {
	sum := sha256.Sum256([]byte(secret))
	now := s.now()
	for _, sec := range p.Secrets {
		if subtle.ConstantTimeCompare(sum[:], sec.SHA256) == 1 {
			if !sec.Expires.IsZero() && now.After(sec.Expires) {
				return newError(http.StatusUnauthorized, "invalid_client", 7000222,
					"The provided client secret keys for app '%s' are expired.", p.ClientID)
			}
			return nil
		}
	}
	return errInvalidSecret(p.ClientID)
}

// checkAssertion tells a certificate assertion (issued by the client itself: iss = client_id)
// from a federated one (issued by an external OIDC issuer) and verifies it.
func (s *Service) checkAssertion(ctx context.Context, p Principal, authority, raw string) error {
	a, err := parseAssertion(raw)
	if err != nil {
		return errMalformedAssertion()
	}
	if strings.EqualFold(a.Issuer, p.ClientID) {
		return s.checkCertificateAssertion(p, authority, a)
	}
	return s.checkFederatedAssertion(ctx, p, a)
}

func (s *Service) checkCertificateAssertion(p Principal, authority string, a *assertion) error {
	cert, ok := findCertificate(p, a)
	if !ok {
		return errAssertionInvalid("The certificate with identifier used to sign the client assertion is not registered on application '%s'.", p.ClientID)
	}
	parsed, err := x509.ParseCertificate(cert.DER)
	if err != nil {
		return fmt.Errorf("parse registered certificate: %w", err)
	}
	claims, err := verifyAssertion(a.Raw, parsed.PublicKey, certificateAlgs, s.now)
	if err != nil {
		return assertionError(err, s.now())
	}
	if !strings.EqualFold(claims.Subject, p.ClientID) {
		return errAssertionInvalid("The assertion's 'sub' must be the client id.")
	}
	if !s.isTokenEndpointAudience(authority, p.TenantID, claims.Audience) {
		return errAssertionInvalid("The assertion's 'aud' must be the token endpoint.")
	}
	return nil
}

// findCertificate finds the registered certificate the assertion names by x5t#S256, x5t or x5c.
func findCertificate(p Principal, a *assertion) (Certificate, bool) {
	var s256 []byte
	if a.X5c0 != nil {
		sum := sha256.Sum256(a.X5c0)
		s256 = sum[:]
	}
	for _, c := range p.Certificates {
		switch {
		case a.X5tS256 != nil:
			if bytes.Equal(a.X5tS256, c.SHA256) {
				return c, true
			}
		case a.X5t != nil:
			if bytes.Equal(a.X5t, c.SHA1) {
				return c, true
			}
		case s256 != nil:
			if bytes.Equal(s256, c.SHA256) {
				return c, true
			}
		}
	}
	return Certificate{}, false
}

// isTokenEndpointAudience accepts the v2 and v1 token endpoints and the issuer, as Entra does,
// of the authority the request reached: the cloud's own origin, or Entra's public names (any
// alias, as they are one service).
func (s *Service) isTokenEndpointAudience(authority, tid string, aud jwt.ClaimStrings) bool {
	wants := []string{s.TokenEndpoint(tid), s.base + "/" + tid + "/oauth2/token", s.Issuer(tid)}
	if authority != s.base {
		wants = []string{azurenames.Issuer(tid)}
		for _, h := range azurenames.EntraHosts() {
			wants = append(wants, "https://"+h+"/"+tid+"/oauth2/v2.0/token", "https://"+h+"/"+tid+"/oauth2/token")
		}
	}
	for _, a := range aud {
		for _, want := range wants {
			if strings.EqualFold(strings.TrimSuffix(a, "/"), want) {
				return true
			}
		}
	}
	return false
}

// checkFederatedAssertion verifies an external issuer's token and matches it to a federated
// credential. The issuer must be one the principal trusts before anything is fetched, so the
// token endpoint cannot be used to make the cloud fetch arbitrary URLs.
func (s *Service) checkFederatedAssertion(ctx context.Context, p Principal, a *assertion) error {
	trusted := false
	for _, f := range p.FederatedCredentials {
		if f.Issuer == a.Issuer {
			trusted = true
			break
		}
	}
	if !trusted {
		reqlog.SetReason(ctx, noFederatedMatchReason(p, a.Issuer, a.Subject, a.Audience))
		return errNoFederatedIssuer(a)
	}
	key, err := s.issuers.key(ctx, a.Issuer, a.Kid)
	if errors.Is(err, errKeyNotFound) {
		return errAssertionInvalid("The key with identifier '%s' was not found in the issuer's keys.", truncate(a.Kid, 64))
	} else if err != nil {
		s.log.InfoContext(ctx, "Fetching federated issuer keys failed", "issuer", a.Issuer, "err", err)
		return errExternalOIDC(a.Issuer)
	}
	claims, err := verifyAssertion(a.Raw, key, federatedAlgs, s.now)
	if err != nil {
		return assertionError(err, s.now())
	}
	for _, f := range p.FederatedCredentials {
		if f.Issuer != claims.Issuer || f.Subject != claims.Subject {
			continue
		}
		for _, want := range f.Audiences {
			for _, got := range claims.Audience {
				if want == got {
					return nil
				}
			}
		}
	}
	reqlog.SetReason(ctx, noFederatedMatchReason(p, claims.Issuer, claims.Subject, claims.Audience))
	return errNoFederatedMatch(a)
}

// noFederatedMatchReason is the request log's account of a refused exchange: what was presented
// and the federated credentials that exist, so the mismatch can be seen at a glance.
func noFederatedMatchReason(p Principal, issuer, subject string, audiences []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "No federated credential of %q (client id %s) matches issuer %q, subject %q, audiences %q. ",
		p.DisplayName, p.ClientID, truncate(issuer, 256), truncate(subject, 256), audiences)
	if len(p.FederatedCredentials) == 0 {
		b.WriteString("It has no federated credentials.")
		return b.String()
	}
	b.WriteString("Its federated credentials:")
	for i, f := range p.FederatedCredentials {
		sep := ";"
		if i == len(p.FederatedCredentials)-1 {
			sep = "."
		}
		fmt.Fprintf(&b, " %q (issuer %q, subject %q, audiences %q)%s", f.Name, f.Issuer, f.Subject, f.Audiences, sep)
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// AccessClaims are the claims of the access tokens the service issues.
type AccessClaims struct {
	jwt.RegisteredClaims
	TenantID   string `json:"tid"`
	ObjectID   string `json:"oid"`
	AppID      string `json:"appid"`
	AZP        string `json:"azp"`
	AppIDACR   string `json:"appidacr"`
	AZPACR     string `json:"azpacr"`
	IDType     string `json:"idtyp"`
	IDP        string `json:"idp"`
	Version    string `json:"ver"`
	UTI        string `json:"uti"`
	MIResource string `json:"xms_mirid,omitempty"`
}

// sign issues an access token with issuer iss (the cloud's own or Azure's public one).
func (s *Service) sign(ctx context.Context, p Principal, iss, audience, acr string) (string, time.Time, error) {
	key, err := s.keys.signer(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	now := s.now().UTC().Truncate(time.Second)
	exp := now.Add(s.lifetime)
	claims := AccessClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    iss,
			Subject:   p.ObjectID,
			Audience:  jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		TenantID: p.TenantID, ObjectID: p.ObjectID, AppID: p.ClientID, AZP: p.ClientID,
		AppIDACR: acr, AZPACR: acr, IDType: "app", IDP: iss, Version: "2.0", UTI: randomID(),
		MIResource: p.ResourceID,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = key.ID
	raw, err := tok.SignedString(key.priv)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign access token: %w", err)
	}
	return raw, exp, nil
}

// knownIssuer accepts the issuers of a tenant's tokens: the cloud's own, and Azure's public v2
// and v1 issuers (same keys, same tenant), so a token got under either set of names works
// under both.
func (s *Service) knownIssuer(iss, tenantID string) bool {
	return iss == s.Issuer(tenantID) || iss == azurenames.Issuer(tenantID) || iss == azurenames.V1Issuer(tenantID)
}

// ErrInvalidToken is returned by Verify for any token it does not accept.
var ErrInvalidToken = errors.New("invalid access token")

// Verify checks an access token issued by this service, as a resource server (ARM, Key Vault)
// does: signature by a published key, RS256 only, exp/nbf with skew, an issuer of a known tenant,
// and an audience accepted by accept.
func (s *Service) Verify(ctx context.Context, raw string, accept func(aud string) bool) (*AccessClaims, error) {
	if len(raw) > maxAssertion {
		return nil, ErrInvalidToken
	}
	var claims AccessClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if key, ok := s.keys.publicKey(kid); ok {
			return key, nil
		}
		return nil, errKeyNotFound
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(s.now), jwt.WithLeeway(clockSkew), jwt.WithExpirationRequired())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if _, err := s.Directory.Tenant(ctx, claims.TenantID); err != nil || !s.knownIssuer(claims.Issuer, claims.TenantID) {
		return nil, fmt.Errorf("%w: unknown issuer", ErrInvalidToken)
	}
	for _, a := range claims.Audience {
		if accept(a) {
			return &claims, nil
		}
	}
	return nil, fmt.Errorf("%w: audience not accepted", ErrInvalidToken)
}
