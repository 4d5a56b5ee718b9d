package cloud

import (
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/shellenv"
)

// Managed-identity endpoints (part 4). Kept apart from server.go so each part owns its file.

// startMSI loads the identity-header key, records the endpoints for `cloud env --compute` and
// mounts the App Service and IMDS style token endpoints on mux.
func (c *Cloud) startMSI(mux *http.ServeMux) error {
	secrets, err := msi.Setup(c.settings.DataDir, c.settings.URL, c.settings.CAFile)
	if err != nil {
		return err
	}
	c.msi = msi.New(msi.Options{Store: c.store, Entra: c.entra, Secrets: secrets, Logger: c.log.With("service", "msi")})
	c.msi.Register(mux)
	return nil
}

// MSI is the managed-identity endpoints' service, for in-process callers.
func (c *Cloud) MSI() *msi.Service { return c.msi }

// ComputeEnv returns the NAME=VALUE lines `cerulean-local cloud env --compute ID` prints: only
// IDENTITY_ENDPOINT, IDENTITY_HEADER and SSL_CERT_FILE, never the bootstrap credentials. It
// reads the data directory, so it works while the cloud runs.
func ComputeEnv(dataDir, resourceID string) ([]string, error) {
	pairs, err := msi.ComputeEnv(dataDir, resourceID)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, p[0]+"="+shellenv.Quote(p[1]))
	}
	return out, nil
}
