// Package entra emulates Microsoft Entra ID (the identity platform v2 endpoints) for the local
// cloud: tenants, principals and their credentials, instance and OpenID discovery, JWKS, and the
// token endpoint's client-credentials grant with secrets, certificate assertions and federated
// assertions. Access tokens are real RS256 JWTs that resource servers verify with Verify.
package entra

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Defaults of Options.
const (
	DefaultTokenLifetime = 3599 * time.Second
	DefaultKeyRotation   = 24 * time.Hour
)

// Options configure the service.
type Options struct {
	Store   *store.Store
	BaseURL string           // "https://127.0.0.1:8443": the authority host, without a trailing slash
	Clock   func() time.Time // nil = time.Now
	Logger  *slog.Logger     // nil = discard
	// IssuerClient fetches federated issuers' documents; nil = NewIssuerClient(http.DefaultTransport).
	IssuerClient  *http.Client
	TokenLifetime time.Duration // 0 = DefaultTokenLifetime
	KeyRotation   time.Duration // 0 = DefaultKeyRotation
	// ADFSTenant is the tenant an ADFS-style authority (https://HOST/adfs) stands for: MSAL
	// Python, and so the Azure CLI, skips instance discovery only for ADFS authorities.
	ADFSTenant string
}

// Service is the Entra ID emulator.
type Service struct {
	Directory *Directory

	base     string
	now      func() time.Time
	log      *slog.Logger
	lifetime time.Duration
	keys     *keyRing
	issuers  *issuerKeys
	adfs     string
}

// New loads (or creates) the signing keys and returns the service.
func New(ctx context.Context, opts Options) (*Service, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.IssuerClient == nil {
		opts.IssuerClient = NewIssuerClient(http.DefaultTransport)
	}
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = DefaultTokenLifetime
	}
	if opts.KeyRotation <= 0 {
		opts.KeyRotation = DefaultKeyRotation
	}
	keys, err := newKeyRing(ctx, opts.Store, opts.Clock, opts.KeyRotation, opts.TokenLifetime+clockSkew)
	if err != nil {
		return nil, err
	}
	return &Service{
		Directory: NewDirectory(opts.Store, opts.Clock),
		base:      strings.TrimSuffix(opts.BaseURL, "/"),
		now:       opts.Clock,
		log:       opts.Logger,
		lifetime:  opts.TokenLifetime,
		keys:      keys,
		issuers:   newIssuerKeys(opts.IssuerClient, opts.Clock),
		adfs:      opts.ADFSTenant,
	}, nil
}

// Issuer is the iss of the tenant's tokens and its OpenID configuration.
func (s *Service) Issuer(tenantID string) string { return s.base + "/" + tenantID + "/v2.0" }

// TokenEndpoint is the tenant's v2 token endpoint.
func (s *Service) TokenEndpoint(tenantID string) string {
	return s.base + "/" + tenantID + "/oauth2/v2.0/token"
}

// RotateKeys replaces the signing key now (the old one stays published until its tokens expire).
func (s *Service) RotateKeys(ctx context.Context) error { return s.keys.Rotate(ctx) }

// Register adds Entra's routes to mux.
func (s *Service) Register(mux *http.ServeMux) {
	h := func(fn httpx.Handler) http.Handler { return httpx.Adapt(s.log, fn, errorWriter(s.log, s.now)) }
	mux.Handle("GET /{tenant}/discovery/instance", h(s.instanceDiscovery))
	mux.Handle("GET /{tenant}/v2.0/.well-known/openid-configuration", h(s.openIDConfiguration))
	mux.Handle("GET /{tenant}/discovery/v2.0/keys", h(s.jwks))
	mux.Handle("GET /{tenant}/discovery/keys", h(s.jwks))
	mux.Handle("/{tenant}/oauth2/v2.0/token", h(s.token))
	s.registerADFS(mux, h)
}

// NotFound answers an unknown path in Entra's error shape.
func (s *Service) NotFound() http.Handler {
	return httpx.Adapt(s.log, func(*http.Request) (httpx.Response, error) { return httpx.Response{}, errNotFound() },
		errorWriter(s.log, s.now))
}

// multiTenant are the authority segments that name no tenant.
var multiTenant = map[string]bool{"common": true, "organizations": true, "consumers": true}

// tenant resolves the {tenant} path segment: a known tenant id, or "" for a multi-tenant alias.
func (s *Service) tenant(r *http.Request, oauthErr string) (string, error) {
	seg := r.PathValue("tenant")
	if multiTenant[strings.ToLower(seg)] {
		return "", nil
	}
	t, err := s.Directory.Tenant(r.Context(), seg)
	if err != nil {
		if len(seg) > 64 {
			seg = seg[:64]
		}
		return "", errTenantNotFound(seg, oauthErr)
	}
	return t.ID, nil
}

// authority is the authority URL a request reached Entra ID under: https://HOST for one of
// Entra's public names (through the cloud's proxy), the cloud's own origin otherwise.
func (s *Service) authority(r *http.Request) string {
	if h := azurenames.RequestHost(r); azurenames.IsEntra(h) {
		return "https://" + h
	}
	return s.base
}

// issuerFor is the iss of tokens and documents for a client that reached Entra ID as r did:
// Azure's public v2 issuer under a public name (whichever alias was used, as Azure does), the
// cloud's own otherwise.
func (s *Service) issuerFor(r *http.Request, tenantID string) string {
	if azurenames.IsEntra(azurenames.RequestHost(r)) {
		return azurenames.Issuer(tenantID)
	}
	return s.Issuer(tenantID)
}

// instanceDiscovery answers MSAL's instance discovery. The authority asked about is
// authorization_endpoint's origin; its tenant is that URL's first path segment (Azure answers
// with the tenant, never a placeholder: MSAL uses tenant_discovery_endpoint as given). Known
// authorities are the cloud's own origin and Entra's public names, whichever name the question
// itself was sent to.
func (s *Service) instanceDiscovery(r *http.Request) (httpx.Response, error) {
	if _, err := s.tenant(r, "invalid_tenant"); err != nil {
		return httpx.Response{}, err
	}
	authority, tenant := s.authority(r), r.PathValue("tenant")
	if ae := r.URL.Query().Get("authorization_endpoint"); ae != "" {
		u, err := url.Parse(ae)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return httpx.Response{}, errUnknownInstance()
		}
		origin := "https://" + strings.ToLower(u.Host)
		if origin != s.base && !azurenames.IsEntra(azurenames.Host(u.Host)) {
			return httpx.Response{}, errUnknownInstance()
		}
		authority = origin
		if seg, _, _ := strings.Cut(strings.TrimPrefix(u.EscapedPath(), "/"), "/"); seg != "" {
			tenant = seg
		}
	}
	if !validTenantSegment(tenant) {
		return httpx.Response{}, errUnknownInstance()
	}
	host := strings.TrimPrefix(authority, "https://")
	meta := []map[string]any{{"preferred_network": host, "preferred_cache": host, "aliases": []string{host}}}
	if azurenames.IsEntra(azurenames.Host(host)) {
		// Azure's answer for the public cloud: one entry naming every alias, so MSAL shares
		// its cache across them.
		meta = []map[string]any{{
			"preferred_network": azurenames.LoginHost, "preferred_cache": "login.windows.net",
			"aliases": azurenames.EntraHosts(),
		}}
	}
	return httpx.Response{Body: map[string]any{
		"tenant_discovery_endpoint": authority + "/" + tenant + "/v2.0/.well-known/openid-configuration",
		"api-version":               "1.1",
		"metadata":                  meta,
	}}, nil
}

// validTenantSegment accepts what a tenant path segment can be: a GUID, a domain name or a
// multi-tenant alias (letters, digits, '-', '.', '_').
func validTenantSegment(seg string) bool {
	if seg == "" || len(seg) > 256 {
		return false
	}
	for _, c := range seg {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

func (s *Service) openIDConfiguration(r *http.Request) (httpx.Response, error) {
	tid, err := s.tenant(r, "invalid_tenant")
	if err != nil {
		return httpx.Response{}, err
	}
	seg, issTenant := tid, tid
	if tid == "" {
		seg, issTenant = strings.ToLower(r.PathValue("tenant")), "{tenantid}"
	}
	authority := s.authority(r)
	b := authority + "/" + seg
	host := strings.TrimPrefix(authority, "https://")
	instance, graph, msgraph := host, host, host
	if authority != s.base { // Azure's public values
		instance, graph, msgraph = "microsoftonline.com", "graph.windows.net", "graph.microsoft.com"
	}
	return httpx.Response{Body: map[string]any{
		"issuer":                                s.issuerFor(r, issTenant),
		"authorization_endpoint":                b + "/oauth2/v2.0/authorize",
		"token_endpoint":                        b + "/oauth2/v2.0/token",
		"device_authorization_endpoint":         b + "/oauth2/v2.0/devicecode",
		"end_session_endpoint":                  b + "/oauth2/v2.0/logout",
		"jwks_uri":                              b + "/discovery/v2.0/keys",
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt"},
		"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
		"response_modes_supported":              []string{"query", "fragment", "form_post"},
		"subject_types_supported":               []string{"pairwise"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
		"claims_supported":                      []string{"sub", "iss", "aud", "exp", "iat", "nbf", "tid", "oid"},
		"request_uri_parameter_supported":       false,
		"tenant_region_scope":                   "NA",
		"cloud_instance_name":                   instance,
		"cloud_graph_host_name":                 graph,
		"msgraph_host":                          msgraph,
	}}, nil
}

func (s *Service) jwks(r *http.Request) (httpx.Response, error) {
	if _, err := s.tenant(r, "invalid_tenant"); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: s.keys.jwks()}, nil
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
