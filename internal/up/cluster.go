package up

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/rollout/fleet"
)

// The local cluster's place in the local cloud.
const (
	clusterGroup    = "cerulean"
	clusterName     = "cerulean-local"
	clusterLocation = "local"
)

// registerCluster makes the local control plane a managed cluster of the local cloud, the way a
// user would set one up (a resource group, then a cluster with the OIDC issuer and workload
// identity on, through the real SDK), binds it to the control plane's issuer, and returns the
// cluster's id and the issuer URL that ARM now reports for it.
func registerCluster(ctx context.Context, az *cloud.Cloud, name, issuer string) (id, issuerURL string, err error) {
	id, err = fleet.Register(ctx, az, fleet.Cluster{ResourceGroup: clusterGroup, Name: name, Location: clusterLocation, Issuer: issuer, OIDCIssuer: true})
	if err != nil {
		return "", "", err
	}
	cfg := fleet.AzureConfig(az)
	cred, err := cfg.Credential()
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	clusters, err := armcontainerservice.NewManagedClustersClient(cfg.SubscriptionID, cred, opts)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	got, err := clusters.Get(ctx, clusterGroup, name, nil)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: read %s: %w", name, err)
	}
	if p := got.Properties; p == nil || p.OidcIssuerProfile == nil || p.OidcIssuerProfile.IssuerURL == nil {
		return "", "", fmt.Errorf("register cluster: %s reports no issuer URL", name)
	}
	return id, *got.Properties.OidcIssuerProfile.IssuerURL, nil
}
