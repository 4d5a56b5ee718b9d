package up

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// The node's place in the local cloud, named as AKS names a node pool's scale set: pod identity
// finds the VMSS to assign identities to from the node's providerID.
const (
	nodeGroup    = "MC_" + clusterGroup + "_" + clusterName + "_" + clusterLocation
	nodeScaleSet = "aks-nodepool1-vmss"
)

// createNodeScaleSet creates the node's resource group and VMSS through the real SDK, and returns
// the providerID of its instance 0, which the kubelet registers.
func createNodeScaleSet(ctx context.Context, az *cloud.Cloud) (string, error) {
	s := az.Settings()
	cfg := azure.Config{
		TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
		AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
		ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
	}
	cred, err := cfg.Credential()
	if err != nil {
		return "", fmt.Errorf("create node scale set: %w", err)
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		return "", fmt.Errorf("create node scale set: %w", err)
	}
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		return "", fmt.Errorf("create node scale set: %w", err)
	}
	if _, err := groups.CreateOrUpdate(ctx, nodeGroup, armresources.ResourceGroup{Location: to.Ptr(clusterLocation)}, nil); err != nil {
		return "", fmt.Errorf("create node scale set: create resource group %s: %w", nodeGroup, err)
	}
	sets, err := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		return "", fmt.Errorf("create node scale set: %w", err)
	}
	poller, err := sets.BeginCreateOrUpdate(ctx, nodeGroup, nodeScaleSet, armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(clusterLocation),
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Capacity: to.Ptr[int64](1)},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("create node scale set %s: %w", nodeScaleSet, err)
	}
	created, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("create node scale set %s: %w", nodeScaleSet, err)
	}
	return "azure://" + *created.ID + "/virtualMachines/0", nil
}

// startNode starts the local node with the images `make images` wrote to bin/images; it
// returns the node and its providerID.
func startNode(ctx context.Context, cp *devenv.ControlPlane, az *cloud.Cloud, opts Options) (*devenv.Node, string, error) {
	providerID, err := createNodeScaleSet(ctx, az)
	if err != nil {
		return nil, "", err
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = devenv.DefaultBinDir(); err != nil {
			return nil, "", err
		}
	}
	archives, err := filepath.Glob(filepath.Join(binDir, "images", "*.tar"))
	if err != nil || len(archives) == 0 {
		return nil, "", fmt.Errorf("start node: no images in %s: run `make images` (or `cerulean-local up --no-node`)", filepath.Join(binDir, "images"))
	}
	node, err := cp.StartNode(ctx, devenv.NodeOptions{ProviderID: providerID, Images: archives, LockWait: opts.NodeWait, Progress: opts.Out})
	return node, providerID, err
}

// proxyImages gives the webhook the proxy sidecar's images `make images` built, when the node
// imported them from bin/images (an older bin/images lacks them: pods then get a warning).
func proxyImages(binDir string) workloadidentity.Config {
	if binDir == "" {
		var err error
		if binDir, err = devenv.DefaultBinDir(); err != nil {
			return workloadidentity.Config{}
		}
	}
	for _, s := range images.All {
		if s.Name != images.AzwiProxy && s.Name != images.AzwiProxyInit {
			continue
		}
		if _, err := os.Stat(filepath.Join(binDir, "images", s.File)); err != nil {
			return workloadidentity.Config{}
		}
	}
	return workloadidentity.Config{ProxyImage: images.AzwiProxy, ProxyInitImage: images.AzwiProxyInit}
}
