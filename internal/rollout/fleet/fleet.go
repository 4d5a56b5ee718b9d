// Package fleet makes local control planes a fleet in the local cloud, as `cerulean rollout`
// expects one: each is registered as a Microsoft.ContainerService managedCluster bound to its own
// service-account issuer, a shared RBAC Key Vault holds a secret, and a rollout file names them.
// `cerulean-local up --clusters` and the rollout tests (rollouttest) share it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	"sigs.k8s.io/yaml"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/rollout"
)

// officerRole (Key Vault Secrets Officer) is the built-in role that lets the vault's owner write its secret
// (Owner gives no data access on an RBAC vault).
const officerRole = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"

// AzureConfig is the cloud's bootstrap principal as the standard environment names it.
func AzureConfig(az *cloud.Cloud) azure.Config {
	s := az.Settings()
	return azure.Config{
		TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
		AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
		ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
	}
}

// Cluster is a managed cluster to register.
type Cluster struct {
	ResourceGroup, Name, Location string
	// Issuer is the control plane's service-account issuer the cluster is bound to.
	Issuer string
	// OIDCIssuer registers the cluster with the OIDC issuer and workload identity on; off, the
	// rollout's issuer step turns them on.
	OIDCIssuer bool
}

// Register creates (or finds) the cluster's resource group and the managed cluster through ARM,
// as a user sets one up with the real SDK, binds it to its issuer, and returns its ARM id.
// Running it again on the same cloud changes nothing.
func Register(ctx context.Context, az *cloud.Cloud, c Cluster) (string, error) {
	cfg := AzureConfig(az)
	cred, err := cfg.Credential()
	if err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	groups, err := armresources.NewResourceGroupsClient(cfg.SubscriptionID, cred, opts)
	if err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	if _, err := groups.CreateOrUpdate(ctx, c.ResourceGroup, armresources.ResourceGroup{Location: to.Ptr(c.Location)}, nil); err != nil {
		return "", fmt.Errorf("register cluster %s: create resource group %s: %w", c.Name, c.ResourceGroup, err)
	}
	clusters, err := armcontainerservice.NewManagedClustersClient(cfg.SubscriptionID, cred, opts)
	if err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	props := &armcontainerservice.ManagedClusterProperties{DNSPrefix: to.Ptr(c.Name)}
	if c.OIDCIssuer {
		props.OidcIssuerProfile = &armcontainerservice.ManagedClusterOIDCIssuerProfile{Enabled: to.Ptr(true)}
		props.SecurityProfile = &armcontainerservice.ManagedClusterSecurityProfile{
			WorkloadIdentity: &armcontainerservice.ManagedClusterSecurityProfileWorkloadIdentity{Enabled: to.Ptr(true)},
		}
	}
	poller, err := clusters.BeginCreateOrUpdate(ctx, c.ResourceGroup, c.Name, armcontainerservice.ManagedCluster{
		Location: to.Ptr(c.Location), Properties: props,
	}, nil)
	if err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	mc, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	if err := az.BindCluster(ctx, *mc.ID, c.Issuer); err != nil {
		return "", fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	return *mc.ID, nil
}

// Vault is the shared RBAC Key Vault and the secret it holds.
type Vault struct {
	ResourceGroup, Name, Location string
	// SecretName is set to SecretValue, unless KeepSecret and the secret exists already.
	SecretName, SecretValue string
	KeepSecret              bool
}

// VaultInfo is what EnsureVault made or found.
type VaultInfo struct {
	ID, URI string
	// SecretValue is the secret's value now in the vault.
	SecretValue string
}

// EnsureVault creates (or finds) the RBAC vault, grants the cloud's bootstrap principal Key Vault
// Secrets Officer on it (an assignment whose name is derived from the vault, so a second call
// finds it), and writes the secret. Running it again with KeepSecret changes nothing.
func EnsureVault(ctx context.Context, az *cloud.Cloud, v Vault) (VaultInfo, error) {
	cfg := AzureConfig(az)
	cred, err := cfg.Credential()
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	sub := cfg.SubscriptionID
	groups, err := armresources.NewResourceGroupsClient(sub, cred, opts)
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	if _, err := groups.CreateOrUpdate(ctx, v.ResourceGroup, armresources.ResourceGroup{Location: to.Ptr(v.Location)}, nil); err != nil {
		return VaultInfo{}, fmt.Errorf("create resource group %s: %w", v.ResourceGroup, err)
	}
	vaults, err := armkeyvault.NewVaultsClient(sub, cred, opts)
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, v.ResourceGroup, v.Name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr(v.Location),
		Properties: &armkeyvault.VaultProperties{
			TenantID:                to.Ptr(cfg.TenantID),
			SKU:                     &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			EnableRbacAuthorization: to.Ptr(true),
		},
	}, nil)
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	kv, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	info := VaultInfo{ID: *kv.ID, URI: *kv.Properties.VaultURI}
	roles, err := armauthorization.NewRoleAssignmentsClient(sub, cred, opts)
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	owner := az.Settings().ObjectID
	name := uuid.NewSHA1(uuid.NameSpaceURL, []byte(info.ID+"|"+officerRole+"|"+owner)).String()
	if _, err := roles.Create(ctx, info.ID, name, armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.Authorization/roleDefinitions/" + officerRole),
			PrincipalID:      to.Ptr(owner), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil); err != nil {
		return VaultInfo{}, fmt.Errorf("grant the owner Secrets Officer on vault %s: %w", v.Name, err)
	}
	sopts, err := cfg.SecretsOptions()
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	secrets, err := azsecrets.NewClient(info.URI, cred, sopts)
	if err != nil {
		return VaultInfo{}, fmt.Errorf("create vault %s: %w", v.Name, err)
	}
	if v.KeepSecret {
		got, err := secrets.GetSecret(ctx, v.SecretName, "", nil)
		var re *azcore.ResponseError
		switch {
		case err == nil && got.Value != nil:
			info.SecretValue = *got.Value
			return info, nil
		case err != nil && (!errors.As(err, &re) || re.StatusCode != http.StatusNotFound):
			return VaultInfo{}, fmt.Errorf("read secret %s of vault %s: %w", v.SecretName, v.Name, err)
		}
	}
	if _, err := secrets.SetSecret(ctx, v.SecretName, azsecrets.SetSecretParameters{Value: to.Ptr(v.SecretValue)}, nil); err != nil {
		return VaultInfo{}, fmt.Errorf("set secret %s of vault %s: %w", v.SecretName, v.Name, err)
	}
	info.SecretValue = v.SecretValue
	return info, nil
}

// WriteRolloutFile writes cfg as YAML to path (0600, atomically).
func WriteRolloutFile(path string, cfg rollout.Config) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode rollout file: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("write rollout file: %w", err)
	}
	return nil
}
