package up

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
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
func registerCluster(ctx context.Context, az *cloud.Cloud, issuer string) (id, issuerURL string, err error) {
	s := az.Settings()
	cfg := azure.Config{
		TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
		AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
		ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
	}
	cred, err := cfg.Credential()
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	if _, err := groups.CreateOrUpdate(ctx, clusterGroup, armresources.ResourceGroup{Location: to.Ptr(clusterLocation)}, nil); err != nil {
		return "", "", fmt.Errorf("register cluster: create resource group %s: %w", clusterGroup, err)
	}
	clusters, err := armcontainerservice.NewManagedClustersClient(s.SubscriptionID, cred, opts)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: %w", err)
	}
	poller, err := clusters.BeginCreateOrUpdate(ctx, clusterGroup, clusterName, armcontainerservice.ManagedCluster{
		Location: to.Ptr(clusterLocation),
		Properties: &armcontainerservice.ManagedClusterProperties{
			OidcIssuerProfile: &armcontainerservice.ManagedClusterOIDCIssuerProfile{Enabled: to.Ptr(true)},
			SecurityProfile: &armcontainerservice.ManagedClusterSecurityProfile{
				WorkloadIdentity: &armcontainerservice.ManagedClusterSecurityProfileWorkloadIdentity{Enabled: to.Ptr(true)},
			},
		},
	}, nil)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: create %s: %w", clusterName, err)
	}
	created, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: create %s: %w", clusterName, err)
	}
	id = *created.ID
	if err := az.BindCluster(ctx, id, issuer); err != nil {
		return "", "", err
	}
	got, err := clusters.Get(ctx, clusterGroup, clusterName, nil)
	if err != nil {
		return "", "", fmt.Errorf("register cluster: read %s: %w", clusterName, err)
	}
	if p := got.Properties; p == nil || p.OidcIssuerProfile == nil || p.OidcIssuerProfile.IssuerURL == nil {
		return "", "", fmt.Errorf("register cluster: %s reports no issuer URL", clusterName)
	}
	return id, *got.Properties.OidcIssuerProfile.IssuerURL, nil
}
