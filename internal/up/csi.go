package up

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/devenv"
)

// CSIProvidersDir is the directory, in the data directory, where `up` serves the Key Vault
// provider for the Secrets Store CSI Driver (azure.sock): the driver's --providers-dir.
// Short, because a unix socket's path is limited to 107 bytes.
const CSIProvidersDir = "csi-providers"

// The provider's cache bound and the driver's rotation poll: a secret changed in Key Vault
// reaches the files of running pods within their sum.
const (
	csiCacheTTL         = time.Minute
	csiRotationInterval = 30 * time.Second
)

// startCSIProvider serves the Key Vault provider against the local cloud, logging to
// logs/csi-provider.log; usePodIdentity asks the node agent at podIdentityEndpoint (empty
// without a node). The caller closes the server and the log.
func startCSIProvider(dataDir string, s cloud.Settings, podIdentityEndpoint string) (*csiprovider.Server, string, *os.File, error) {
	logFile, err := os.OpenFile(filepath.Join(dataDir, "logs", "csi-provider.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", nil, fmt.Errorf("open the CSI provider's log: %w", err)
	}
	p, err := csiprovider.New(csiprovider.Options{
		Azure:          azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName:      cloud.CloudName,
		VaultLookupURL: s.URL + cloud.VaultLookupPath,
		CacheTTL:       csiCacheTTL,
		Logger:         slog.New(slog.NewJSONHandler(logFile, nil)),

		PodIdentityEndpoint: podIdentityEndpoint,
	})
	if err != nil {
		_ = logFile.Close()
		return nil, "", nil, fmt.Errorf("start the CSI provider: %w", err)
	}
	socket := filepath.Join(dataDir, CSIProvidersDir, "azure.sock")
	srv, err := csiprovider.Listen(p, socket)
	if err != nil {
		_ = logFile.Close()
		return nil, "", nil, fmt.Errorf("start the CSI provider: %w", err)
	}
	return srv, socket, logFile, nil
}

// startCSIDriver runs the upstream Secrets Store CSI Driver beside the node's kubelet, registered
// with it, finding the provider in DIR/csi-providers, rotating mounted secrets every
// csiRotationInterval. Its log is logs/secrets-store-csi-driver.log. The caller stops it.
func startCSIDriver(ctx context.Context, node *devenv.Node, dataDir string) (*devenv.SecretsStoreDriver, error) {
	return node.StartSecretsStoreDriver(ctx, devenv.SecretsStoreOptions{
		ProvidersDir:     filepath.Join(dataDir, CSIProvidersDir),
		RotationInterval: csiRotationInterval,
	})
}
