package up

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
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
// logs/csi-provider.log; usePodIdentity asks the node agent at podIdentityEndpoint and
// useVMManagedIdentity gets the identities of the node's scale set from nodeIMDS (both empty
// without a node). The caller closes the server and the log.
func startCSIProvider(dataDir string, s cloud.Settings, podIdentityEndpoint string, nodeIMDS *nodeagent.IMDSSource) (*csiprovider.Server, string, *os.File, error) {
	logFile, err := os.OpenFile(filepath.Join(dataDir, "logs", "csi-provider.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", nil, fmt.Errorf("open the CSI provider's log: %w", err)
	}
	o := csiprovider.Options{
		Azure:          azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName:      cloud.CloudName,
		VaultLookupURL: s.URL + cloud.VaultLookupPath,
		CacheTTL:       csiCacheTTL,
		Logger:         slog.New(slog.NewJSONHandler(logFile, nil)),

		PodIdentityEndpoint: podIdentityEndpoint,
	}
	if nodeIMDS != nil {
		o.ManagedIdentity = func(id string) (azcore.TokenCredential, error) { return newNodeIdentity(nodeIMDS, id), nil }
	}
	p, err := csiprovider.New(o)
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

// nodeIdentity is one managed identity of the node's scale set as a TokenCredential: the
// provider runs in up's process, on the machine, where nothing answers at 169.254.169.254 (the
// node agent's DNAT takes only pods' requests), so it asks the scale set's endpoint, as the
// upstream provider on an Azure node asks IMDS.
type nodeIdentity struct {
	imds *nodeagent.IMDSSource
	id   nodeagent.Identity
}

// newNodeIdentity selects the identity as azidentity does: a resource id (starting with "/"),
// else a client id; empty is the scale set's system-assigned or only identity.
func newNodeIdentity(imds *nodeagent.IMDSSource, id string) *nodeIdentity {
	n := &nodeIdentity{imds: imds}
	if strings.HasPrefix(id, "/") {
		n.id.ResourceID = id
	} else {
		n.id.ClientID = id
	}
	return n
}

// GetToken asks the endpoint for a token of the identity for the scope's resource.
func (n *nodeIdentity) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if len(opts.Scopes) != 1 {
		return azcore.AccessToken{}, fmt.Errorf("get the node's managed identity token: want 1 scope, got %d", len(opts.Scopes))
	}
	tok, err := n.imds.Token(ctx, n.id, strings.TrimSuffix(opts.Scopes[0], "/.default"))
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("get the node's managed identity token: %w", err)
	}
	return azcore.AccessToken{Token: tok.AccessToken, ExpiresOn: tok.ExpiresOn}, nil
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
