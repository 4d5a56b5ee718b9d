package cloud

import (
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/midataplane"
)

// The managed-identity data plane. Kept apart from server.go so each part owns its file.

// IdentityURL is the local cloud's x-ms-identity-url: where a resource provider (the manager)
// asks for the credentials of the managed identities it hosts.
func (c *Cloud) IdentityURL() string { return c.settings.URL + midataplane.Path }

// registerIdentityDataPlane mounts the managed-identity credentials API on mux.
func (c *Cloud) registerIdentityDataPlane(mux *http.ServeMux, opts Options) {
	midataplane.New(midataplane.Options{
		Entra: c.entra, Authz: c.arm.Authz(), TenantID: c.settings.TenantID, Audiences: arm.Audiences, BaseURL: c.settings.URL,
		Issuer: &midataplane.Issuer{Directory: c.entra.Directory, CA: c.pki.CA, AuthorityHost: c.settings.CredentialsAuthorityHost, Clock: opts.Clock},
		Logger: opts.Logger.With("service", "identity"),
	}).Register(mux)
}
