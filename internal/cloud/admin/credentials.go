package admin

import (
	"net/http"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/midataplane"
)

// Validity bounds of issued identity credentials, and the default: Azure's managed-identity data
// plane issues certificates for 90 days.
const (
	DefaultCredentialValidity = midataplane.DefaultValidity
	minCredentialValidity     = time.Hour
	maxCredentialValidity     = 365 * 24 * time.Hour
)

// IssueCredentialsRequest is the optional body of POST /principals/{clientId}/credentials.
type IssueCredentialsRequest struct {
	// Validity is a Go duration ("2160h"); DefaultCredentialValidity when empty.
	Validity string `json:"validity,omitempty"`
}

func (a *API) registerCredentials(mux *http.ServeMux, h func(httpx.Handler) http.Handler) {
	if a.o.CA == nil {
		return
	}
	mux.Handle("POST "+Prefix+"/principals/{clientId}/credentials", h(a.issueCredentials))
}

// issueCredentials issues a managed identity's credentials as HyperShift's
// UserAssignedIdentityCredentials JSON, as the managed-identity data plane (midataplane) does,
// but with a validity of the caller's choosing. The answer holds the private key and is never
// logged.
func (a *API) issueCredentials(r *http.Request) (httpx.Response, error) {
	var req IssueCredentialsRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return httpx.Response{}, err
		}
	}
	validity := DefaultCredentialValidity
	if req.Validity != "" {
		d, err := time.ParseDuration(req.Validity)
		if err != nil || d < minCredentialValidity || d > maxCredentialValidity {
			return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "validity must be a duration from 1h to 8760h."}
		}
		validity = d
	}
	ctx := r.Context()
	p, err := a.o.Entra.Directory.Principal(ctx, a.o.TenantID, r.PathValue("clientId"))
	if err != nil {
		return httpx.Response{}, err
	}
	if p.Kind != entra.KindManagedIdentity {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "Credentials are issued to managed identities only."}
	}
	iss := &midataplane.Issuer{Directory: a.o.Entra.Directory, CA: a.o.CA, AuthorityHost: a.o.CredentialsAuthorityHost, Clock: a.o.Clock}
	f, err := iss.Issue(ctx, p, validity)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusCreated, Body: f}, nil
}
