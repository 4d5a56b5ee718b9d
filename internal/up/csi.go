package up

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/csiprovider"
)

// CSIProvidersDir is the directory, in the data directory, where `up` serves the Key Vault
// provider for the Secrets Store CSI Driver (azure.sock): the driver's --providers-dir.
// Short, because a unix socket's path is limited to 107 bytes.
const CSIProvidersDir = "csi-providers"

// startCSIProvider serves the Key Vault provider against the local cloud, logging to
// logs/csi-provider.log. The caller closes the server and the log.
func startCSIProvider(dataDir string, s cloud.Settings) (*csiprovider.Server, string, *os.File, error) {
	logFile, err := os.OpenFile(filepath.Join(dataDir, "logs", "csi-provider.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", nil, fmt.Errorf("open the CSI provider's log: %w", err)
	}
	p, err := csiprovider.New(csiprovider.Options{
		Azure:          azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName:      cloud.CloudName,
		VaultLookupURL: s.URL + cloud.VaultLookupPath,
		CacheTTL:       time.Minute,
		Logger:         slog.New(slog.NewJSONHandler(logFile, nil)),
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
