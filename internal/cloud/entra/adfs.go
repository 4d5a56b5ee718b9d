package entra

import (
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// The ADFS-style authority, https://HOST/adfs, stands for one tenant (Options.ADFSTenant). It
// exists for the Azure CLI in Debian (2.45, MSAL Python 1.21), which has no switch to turn
// instance discovery off: MSAL Python skips it only for ADFS authorities, reads
// {authority}/.well-known/openid-configuration (no /v2.0), and posts to the token endpoint named
// there — the tenant's own, so tokens are exactly the tenant's.

// registerADFS adds the ADFS routes when an ADFS tenant is configured.
func (s *Service) registerADFS(mux *http.ServeMux, h func(httpx.Handler) http.Handler) {
	if s.adfs == "" {
		return
	}
	mux.Handle("GET /adfs/.well-known/openid-configuration", h(s.adfsConfiguration))
	// `az login --tenant adfs` first resolves a tenant that is not a GUID by reading
	// {active_directory}/{tenant}/.well-known/openid-configuration and taking the tenant from
	// the issuer's path; with the ADFS endpoint that is /adfs/adfs/....
	mux.Handle("GET /adfs/adfs/.well-known/openid-configuration", h(s.adfsConfiguration))
}

// adfsConfiguration is the OpenID configuration of the ADFS-style authority: the ADFS tenant's
// documents, whose token endpoint is that tenant's.
func (s *Service) adfsConfiguration(r *http.Request) (httpx.Response, error) {
	r.SetPathValue("tenant", s.adfs)
	return s.openIDConfiguration(r)
}
