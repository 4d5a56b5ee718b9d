// Package admin is a small management API for principals and their credentials, until ARM (part
// 2) offers managed identities and federated credentials the Azure way; ARM will replace it.
//
// It answers only loopback clients, and only a bearer token for the ARM audience issued to the
// subscription's Owner (the bootstrap service principal), so it is no softer than ARM will be.
package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/pki"
)

// Prefix is the root of the admin API.
const Prefix = "/_cerulean/admin"

const maxBody = 64 << 10

// Options configure the API.
type Options struct {
	Entra         *entra.Service
	TenantID      string
	OwnerObjectID string
	Audience      string // the ARM audience
	Logger        *slog.Logger
	Clock         func() time.Time
	Faults        *faults.Injector // the fault rules under /faults; nil = no such routes
	Requests      *reqlog.Log      // the request log under /requests; nil = no such routes
	CA            *pki.CA          // signs managed identities' credentials; nil = no such route
	// CredentialsAuthorityHost is the authentication_endpoint of the credentials it issues.
	CredentialsAuthorityHost string
	Skew                     *Skew // the clock's offset, moved by /clock/advance; nil = no such routes
}

// API is the admin API.
type API struct{ o Options }

// New returns the API.
func New(o Options) *API { return &API{o: o} }

// Error is an admin error, rendered in ARM's shape {"error":{"code","message"}}.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func writeError(log *slog.Logger) httpx.ErrorWriter {
	return func(w http.ResponseWriter, r *http.Request, err error) int {
		var e *Error
		switch {
		case errors.As(err, &e):
		case errors.Is(err, entra.ErrNotFound):
			e = &Error{http.StatusNotFound, "NotFound", "The principal was not found."}
		case errors.Is(err, entra.ErrInvalid):
			e = &Error{http.StatusBadRequest, "InvalidRequestContent", err.Error()}
		case errors.Is(err, entra.ErrConflict):
			e = &Error{http.StatusConflict, "Conflict", err.Error()}
		default:
			log.ErrorContext(r.Context(), "Request failed", "path", r.URL.Path, "err", err)
			e = &Error{http.StatusInternalServerError, "InternalServerError", "The request failed."}
		}
		return httpx.Write(w, httpx.Response{Status: e.Status, Header: http.Header{"X-Ms-Error-Code": {e.Code}},
			Body: map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}}})
	}
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	h := func(fn httpx.Handler) http.Handler {
		return httpx.Adapt(a.o.Logger, a.authorized(fn), writeError(a.o.Logger))
	}
	mux.Handle("POST "+Prefix+"/principals", h(a.createPrincipal))
	mux.Handle("GET "+Prefix+"/principals/{clientId}", h(a.getPrincipal))
	mux.Handle("DELETE "+Prefix+"/principals/{clientId}", h(a.deletePrincipal))
	mux.Handle("POST "+Prefix+"/principals/{clientId}/secrets", h(a.addSecret))
	mux.Handle("PUT "+Prefix+"/principals/{clientId}/federatedIdentityCredentials/{name}", h(a.putFIC))
	a.registerFaults(mux, h)
	a.registerCredentials(mux, h)
	a.registerClock(mux, h)
}

func (a *API) authorized(next httpx.Handler) httpx.Handler {
	return func(r *http.Request) (httpx.Response, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return httpx.Response{}, &Error{http.StatusForbidden, "Forbidden", "The admin API answers loopback clients only."}
		}
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return httpx.Response{}, &Error{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing."}
		}
		claims, err := a.o.Entra.Verify(r.Context(), raw, func(aud string) bool {
			return strings.TrimSuffix(aud, "/") == strings.TrimSuffix(a.o.Audience, "/")
		})
		if err != nil {
			return httpx.Response{}, &Error{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid."}
		}
		if claims.ObjectID != a.o.OwnerObjectID || claims.TenantID != a.o.TenantID {
			return httpx.Response{}, &Error{http.StatusForbidden, "AuthorizationFailed", fmt.Sprintf("The client with object id '%s' does not have authorization to manage principals.", claims.ObjectID)}
		}
		return next(r)
	}
}

// PrincipalView is a principal as the API shows it: no secret hashes.
type PrincipalView struct {
	TenantID             string                      `json:"tenantId"`
	ObjectID             string                      `json:"objectId"`
	ClientID             string                      `json:"clientId"`
	Kind                 entra.Kind                  `json:"kind"`
	DisplayName          string                      `json:"displayName"`
	ResourceID           string                      `json:"resourceId,omitempty"`
	Secrets              []SecretView                `json:"secrets"`
	FederatedCredentials []entra.FederatedCredential `json:"federatedIdentityCredentials"`
}

// SecretView describes a secret without its value.
type SecretView struct {
	KeyID   string    `json:"keyId"`
	Hint    string    `json:"hint"`
	Expires time.Time `json:"expires"`
}

func view(p entra.Principal) PrincipalView {
	v := PrincipalView{TenantID: p.TenantID, ObjectID: p.ObjectID, ClientID: p.ClientID, Kind: p.Kind,
		DisplayName: p.DisplayName, ResourceID: p.ResourceID, Secrets: []SecretView{}, FederatedCredentials: p.FederatedCredentials}
	for _, s := range p.Secrets {
		v.Secrets = append(v.Secrets, SecretView{KeyID: s.KeyID, Hint: s.Hint, Expires: s.Expires})
	}
	if v.FederatedCredentials == nil {
		v.FederatedCredentials = []entra.FederatedCredential{}
	}
	return v
}

func decode(r *http.Request, v any) error {
	body, err := httpx.ReadBody(r, maxBody)
	if errors.Is(err, httpx.ErrTooLarge) {
		return &Error{http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "The request body is too large."}
	} else if err != nil {
		return &Error{http.StatusBadRequest, "InvalidRequestContent", "The request body could not be read."}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{http.StatusBadRequest, "InvalidRequestContent", "The request content is not valid JSON for this request."}
	}
	return nil
}

// CreatePrincipalRequest is the body of POST /principals.
type CreatePrincipalRequest struct {
	DisplayName string     `json:"displayName"`
	Kind        entra.Kind `json:"kind"`
	ResourceID  string     `json:"resourceId,omitempty"`
}

func (a *API) createPrincipal(r *http.Request) (httpx.Response, error) {
	var req CreatePrincipalRequest
	if err := decode(r, &req); err != nil {
		return httpx.Response{}, err
	}
	if req.Kind == "" {
		req.Kind = entra.KindServicePrincipal
	}
	if req.DisplayName == "" || len(req.DisplayName) > 256 {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "displayName must have 1 to 256 characters."}
	}
	p, err := a.o.Entra.Directory.CreatePrincipal(r.Context(), entra.Principal{
		TenantID: a.o.TenantID, Kind: req.Kind, DisplayName: req.DisplayName, ResourceID: req.ResourceID,
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusCreated, Body: view(p)}, nil
}

func (a *API) getPrincipal(r *http.Request) (httpx.Response, error) {
	p, err := a.o.Entra.Directory.Principal(r.Context(), a.o.TenantID, r.PathValue("clientId"))
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: view(p)}, nil
}

func (a *API) deletePrincipal(r *http.Request) (httpx.Response, error) {
	if err := a.o.Entra.Directory.DeletePrincipal(r.Context(), a.o.TenantID, r.PathValue("clientId")); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusNoContent}, nil
}

// SecretCreated is the answer to POST /principals/{clientId}/secrets: the only time the value is shown.
type SecretCreated struct {
	KeyID   string    `json:"keyId"`
	Secret  string    `json:"secret"`
	Expires time.Time `json:"expires"`
}

func (a *API) addSecret(r *http.Request) (httpx.Response, error) {
	exp := a.o.Clock().AddDate(1, 0, 0)
	value, s, err := a.o.Entra.Directory.AddSecret(r.Context(), a.o.TenantID, r.PathValue("clientId"), exp)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusCreated, Body: SecretCreated{KeyID: s.KeyID, Secret: value, Expires: s.Expires}}, nil
}

// FederatedCredentialRequest is the body of PUT .../federatedIdentityCredentials/{name}.
type FederatedCredentialRequest struct {
	Issuer    string   `json:"issuer"`
	Subject   string   `json:"subject"`
	Audiences []string `json:"audiences"`
}

func (a *API) putFIC(r *http.Request) (httpx.Response, error) {
	var req FederatedCredentialRequest
	if err := decode(r, &req); err != nil {
		return httpx.Response{}, err
	}
	fic := entra.FederatedCredential{Name: r.PathValue("name"), Issuer: req.Issuer, Subject: req.Subject, Audiences: req.Audiences}
	created, err := a.o.Entra.Directory.PutFederatedCredential(r.Context(), a.o.TenantID, r.PathValue("clientId"), fic)
	if err != nil {
		return httpx.Response{}, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return httpx.Response{Status: status, Body: fic}, nil
}
