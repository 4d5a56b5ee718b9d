package midataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// Path is where the data plane answers: the local cloud's x-ms-identity-url is the cloud's
// address followed by Path.
const Path = azure.LocalIdentityPath

// APIVersion is the one api-version of the data plane.
const APIVersion = "2024-01-01"

// AssignAction is the RBAC action a caller needs on an identity to get its credentials: the
// action that lets a principal put an identity on a resource (Managed Identity Operator,
// Contributor, Owner), since whoever holds the credentials acts as the identity.
const AssignAction = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"

const (
	maxBody       = 64 << 10
	maxIdentities = 50
)

// Options configure the service.
type Options struct {
	Entra    *entra.Service
	Authz    *authz.Authorizer
	Issuer   *Issuer
	TenantID string
	// Audiences are the token audiences accepted (ARM's).
	Audiences []string
	// BaseURL is the cloud's address; the credentials' client_secret_url is BaseURL + Path.
	BaseURL string
	Logger  *slog.Logger
}

// Service serves the credentials API.
type Service struct{ o Options }

// New returns the service.
func New(o Options) *Service { return &Service{o: o} }

// Register adds the route to mux.
func (s *Service) Register(mux *http.ServeMux) {
	mux.Handle("POST "+Path, httpx.Adapt(s.o.Logger, s.credentials, s.writeError))
}

// CredRequest is the request body (Azure's CredRequestDefinition).
type CredRequest struct {
	IdentityIDs        []string        `json:"identityIds"`
	DelegatedResources []string        `json:"delegatedResources,omitempty"`
	CustomClaims       json.RawMessage `json:"customClaims,omitempty"`
}

// NestedCredentials is one user-assigned identity's credentials in the answer (Azure's
// NestedCredentialsObject): the credentials file's fields plus the identity's resource id.
type NestedCredentials struct {
	hcpcredentials.File
	ResourceID string `json:"resource_id"`
}

// CredentialsObject is the answer (Azure's CredentialsObject). No system-assigned identity
// exists here, so only explicit_identities is set.
type CredentialsObject struct {
	ExplicitIdentities []NestedCredentials `json:"explicit_identities"`
}

// Error is a data-plane error, rendered as {"error":{"code","message"}}.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) int {
	var e *Error
	if !errors.As(err, &e) {
		s.o.Logger.ErrorContext(r.Context(), "Request failed", "path", r.URL.Path, "err", err)
		e = &Error{http.StatusInternalServerError, "InternalServerError", "The request failed."}
	}
	h := http.Header{"X-Ms-Error-Code": {e.Code}}
	if e.Status == http.StatusUnauthorized {
		h.Set("Www-Authenticate", fmt.Sprintf(`Bearer authorization="%s/%s"`, strings.TrimSuffix(s.o.BaseURL, "/"), s.o.TenantID))
	}
	return httpx.Write(w, httpx.Response{Status: e.Status, Header: h,
		Body: map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}}})
}

// credentials issues new credentials for every identity asked for, once the caller has proven
// it may assign each of them. It is all or nothing: every identity is checked before any
// certificate is registered.
func (s *Service) credentials(r *http.Request) (httpx.Response, error) {
	ctx := r.Context()
	if v := r.URL.Query().Get("api-version"); v != APIVersion {
		if v == "" {
			return httpx.Response{}, &Error{http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter is required (" + APIVersion + ")."}
		}
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidApiVersionParameter", fmt.Sprintf("The api-version '%s' is invalid. The supported version is '%s'.", v, APIVersion)}
	}
	caller, err := s.authenticate(ctx, r)
	if err != nil {
		return httpx.Response{}, err
	}
	req, err := decode(r)
	if err != nil {
		return httpx.Response{}, err
	}
	principals, err := s.identities(ctx, caller, req.IdentityIDs)
	if err != nil {
		return httpx.Response{}, err
	}
	out := CredentialsObject{ExplicitIdentities: make([]NestedCredentials, 0, len(principals))}
	for _, p := range principals {
		f, err := s.o.Issuer.Issue(ctx, p, DefaultValidity)
		if err != nil {
			return httpx.Response{}, fmt.Errorf("issue credentials: %w", err)
		}
		f.ClientSecretURL = strings.TrimSuffix(s.o.BaseURL, "/") + Path
		out.ExplicitIdentities = append(out.ExplicitIdentities, NestedCredentials{File: f, ResourceID: p.ResourceID})
	}
	s.o.Logger.InfoContext(ctx, "Issued managed identity credentials", "caller", caller, "identities", len(out.ExplicitIdentities))
	return httpx.Response{Status: http.StatusOK, Body: out}, nil
}

// authenticate verifies the bearer token (the cloud's, for ARM's audience, of its tenant) and
// returns the caller's object id. Nothing of the token reaches an error or a log.
func (s *Service) authenticate(ctx context.Context, r *http.Request) (string, error) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return "", &Error{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing or not a bearer token."}
	}
	claims, err := s.o.Entra.Verify(ctx, strings.TrimSpace(raw), func(aud string) bool {
		for _, a := range s.o.Audiences {
			if strings.EqualFold(strings.TrimSuffix(aud, "/"), strings.TrimSuffix(a, "/")) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return "", &Error{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid, expired or not for the management audience."}
	}
	if !strings.EqualFold(claims.TenantID, s.o.TenantID) || claims.ObjectID == "" {
		return "", &Error{http.StatusUnauthorized, "InvalidAuthenticationTokenTenant", "The access token is from the wrong tenant."}
	}
	return claims.ObjectID, nil
}

func decode(r *http.Request) (CredRequest, error) {
	body, err := httpx.ReadBody(r, maxBody)
	if errors.Is(err, httpx.ErrTooLarge) {
		return CredRequest{}, &Error{http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "The request body is too large."}
	} else if err != nil {
		return CredRequest{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "The request body could not be read."}
	}
	var req CredRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return CredRequest{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "The request content is not valid JSON of the shape {\"identityIds\": [...]}."}
	}
	switch {
	case len(req.DelegatedResources) > 0:
		return CredRequest{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "delegatedResources are not supported by the local cloud."}
	case len(req.IdentityIDs) == 0:
		return CredRequest{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "identityIds must name at least one user-assigned identity."}
	case len(req.IdentityIDs) > maxIdentities:
		return CredRequest{}, &Error{http.StatusBadRequest, "InvalidRequestContent", fmt.Sprintf("identityIds may name at most %d identities.", maxIdentities)}
	}
	return req, nil
}

// identities finds each identity's principal and checks that the caller may assign it. An
// identity the caller may not assign is 403 whether or not it exists, so the answer reveals
// nothing about identities out of the caller's reach.
func (s *Service) identities(ctx context.Context, caller string, ids []string) ([]entra.Principal, error) {
	all, err := s.o.Entra.Directory.Principals(ctx, s.o.TenantID)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	out := make([]entra.Principal, 0, len(ids))
	for _, id := range ids {
		if !strings.HasPrefix(id, "/subscriptions/") || !strings.Contains(strings.ToLower(id), "/providers/microsoft.managedidentity/userassignedidentities/") {
			return nil, &Error{http.StatusBadRequest, "InvalidRequestContent", fmt.Sprintf("'%s' is not a user-assigned identity's resource id.", id)}
		}
		if err := s.o.Authz.Check(ctx, caller, AssignAction, id); err != nil {
			if errors.Is(err, authz.ErrDenied) {
				return nil, &Error{http.StatusForbidden, "AuthorizationFailed", fmt.Sprintf(
					"The client with object id '%s' does not have authorization to perform action '%s' over scope '%s'.", caller, AssignAction, id)}
			}
			return nil, err
		}
		found := false
		for _, p := range all {
			if p.Kind == entra.KindManagedIdentity && strings.EqualFold(p.ResourceID, id) {
				out = append(out, p)
				found = true
				break
			}
		}
		if !found {
			return nil, &Error{http.StatusNotFound, "ResourceNotFound", fmt.Sprintf("The user-assigned identity '%s' was not found.", id)}
		}
	}
	return out, nil
}
