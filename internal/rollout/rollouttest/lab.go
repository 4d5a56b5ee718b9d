// Package rollouttest sets up what `cerulean rollout` rolls out to, in the local cloud: managed
// clusters bound to real local control planes (each cluster's issuer is its control plane's),
// a shared RBAC Key Vault holding a secret, and a rollout file naming them with the test app's
// chart. The rollout tests and the benchmark share it; its functions return errors.
package rollouttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
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
	"github.com/cerulean/cerulean/internal/devenv"
)

// Names of the lab.
const (
	ClusterGroup   = "clusters"
	SharedGroup    = "shared"
	Location       = "local"
	Namespace      = "app"
	ServiceAccount = "app"
	SecretName     = "db-password"
	// Role is granted by name, as a user writes it.
	Role = "Key Vault Secrets User"
	// officerRole (Key Vault Secrets Officer) lets the lab's owner write the secret (Owner gives no data access).
	officerRole = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
)

// Lab is a set of clusters and a vault in the cloud, and the rollout file that names them.
type Lab struct {
	// File is the rollout file's path.
	File string
	// Azure is the bootstrap principal's configuration (what `cerulean cloud env` gives).
	Azure azure.Config
	// ClusterIDs, Planes: cluster i is bound to Planes[i].
	ClusterIDs []string
	Planes     []*devenv.ControlPlane
	// VaultID and VaultURI are the shared vault's; SecretValue is the secret's value.
	VaultID, VaultURI, SecretValue string
}

// Options configure New.
type Options struct {
	// Dir receives the rollout file.
	Dir string
	// Clusters is the number of clusters; cluster i is bound to Planes[i % len(Planes)]. When
	// planes are shared, each cluster's app gets a namespace of its own (app-NAME).
	Clusters int
	Planes   []*devenv.ControlPlane
	// Chart is the app's chart; empty means this package's testdata chart.
	Chart string
	// Namespace is the app's namespace; empty means Namespace ("app").
	Namespace string
}

// AzureConfig is the cloud's bootstrap principal as the standard environment names it.
func AzureConfig(az *cloud.Cloud) azure.Config {
	s := az.Settings()
	return azure.Config{
		TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
		AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
		ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
	}
}

// Getenv serves cfg as the AZURE_* variables.
func Getenv(cfg azure.Config) func(string) string {
	env := map[string]string{
		"AZURE_TENANT_ID": cfg.TenantID, "AZURE_SUBSCRIPTION_ID": cfg.SubscriptionID,
		"AZURE_CLIENT_ID": cfg.ClientID, "AZURE_CLIENT_SECRET": cfg.ClientSecret,
		"AZURE_AUTHORITY_HOST": cfg.AuthorityHost, "AZURE_RESOURCE_MANAGER_ENDPOINT": cfg.ResourceManagerEndpoint,
		"AZURE_RESOURCE_MANAGER_AUDIENCE": cfg.ResourceManagerAudience, "SSL_CERT_FILE": cfg.CAFile,
	}
	return func(k string) string { return env[k] }
}

// ChartDir is the test app's chart in this package's testdata.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "app")
}

// ClusterName is the name of cluster i (0-based).
func ClusterName(i int) string { return fmt.Sprintf("aks-%d", i+1) }

// New registers the clusters with the OIDC issuer and workload identity off (the rollout turns
// them on), binds each to its control plane's issuer, creates the vault with its secret, and
// writes the rollout file.
func New(ctx context.Context, az *cloud.Cloud, o Options) (*Lab, error) {
	if len(o.Planes) == 0 || o.Clusters <= 0 {
		return nil, fmt.Errorf("new lab: clusters and planes are required")
	}
	l := &Lab{Azure: AzureConfig(az), Planes: make([]*devenv.ControlPlane, o.Clusters)}
	cred, err := l.Azure.Credential()
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	opts, err := l.Azure.ARMOptions()
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	sub := l.Azure.SubscriptionID
	groups, err := armresources.NewResourceGroupsClient(sub, cred, opts)
	if err != nil {
		return nil, err
	}
	for _, g := range []string{ClusterGroup, SharedGroup} {
		if _, err := groups.CreateOrUpdate(ctx, g, armresources.ResourceGroup{Location: to.Ptr(Location)}, nil); err != nil {
			return nil, fmt.Errorf("create resource group %s: %w", g, err)
		}
	}
	clusters, err := armcontainerservice.NewManagedClustersClient(sub, cred, opts)
	if err != nil {
		return nil, err
	}
	shared := o.Clusters > len(o.Planes)
	ns := o.Namespace
	if ns == "" {
		ns = Namespace
	}
	type fileCluster struct {
		ID         string `json:"id"`
		Kubeconfig string `json:"kubeconfig"`
		Namespace  string `json:"namespace,omitempty"`
	}
	var fcs []fileCluster
	for i := range o.Clusters {
		name := ClusterName(i)
		poller, err := clusters.BeginCreateOrUpdate(ctx, ClusterGroup, name, armcontainerservice.ManagedCluster{
			Location: to.Ptr(Location), Properties: &armcontainerservice.ManagedClusterProperties{DNSPrefix: to.Ptr(name)},
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("create cluster %s: %w", name, err)
		}
		mc, err := poller.PollUntilDone(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("create cluster %s: %w", name, err)
		}
		cp := o.Planes[i%len(o.Planes)]
		if err := az.BindCluster(ctx, *mc.ID, cp.IssuerURL); err != nil {
			return nil, err
		}
		l.ClusterIDs = append(l.ClusterIDs, *mc.ID)
		l.Planes[i] = cp
		fc := fileCluster{ID: *mc.ID, Kubeconfig: cp.Kubeconfig}
		if shared {
			fc.Namespace = ns + "-" + name
		}
		fcs = append(fcs, fc)
	}
	if err := l.vault(ctx, cred, opts, az.Settings().ObjectID); err != nil {
		return nil, err
	}
	chart := o.Chart
	if chart == "" {
		chart = ChartDir()
	}
	file := map[string]any{
		"clusters": fcs,
		"keyVault": map[string]any{"id": l.VaultID, "verifySecret": SecretName},
		"role":     Role,
		"identity": map[string]any{"suffix": "-app"},
		"app": map[string]any{
			"chart":  chart,
			"values": map[string]any{"vault": map[string]any{"url": l.VaultURI, "secret": SecretName}},
		},
		"namespace":      ns,
		"serviceAccount": ServiceAccount,
	}
	b, err := yaml.Marshal(file)
	if err != nil {
		return nil, err
	}
	l.File = filepath.Join(o.Dir, "rollout.yaml")
	if err := os.WriteFile(l.File, b, 0o600); err != nil {
		return nil, fmt.Errorf("write rollout file: %w", err)
	}
	return l, nil
}

// vault creates the RBAC vault and its secret, written by the owner as Secrets Officer.
func (l *Lab) vault(ctx context.Context, cred azcore.TokenCredential, opts *arm.ClientOptions, owner string) error {
	sub := l.Azure.SubscriptionID
	vaults, err := armkeyvault.NewVaultsClient(sub, cred, opts)
	if err != nil {
		return err
	}
	name := "ro" + strings.ReplaceAll(uuid.NewString(), "-", "")[:14]
	poller, err := vaults.BeginCreateOrUpdate(ctx, SharedGroup, name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr(Location),
		Properties: &armkeyvault.VaultProperties{
			TenantID:                to.Ptr(l.Azure.TenantID),
			SKU:                     &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			EnableRbacAuthorization: to.Ptr(true),
		},
	}, nil)
	if err != nil {
		return fmt.Errorf("create vault: %w", err)
	}
	v, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return fmt.Errorf("create vault: %w", err)
	}
	l.VaultID, l.VaultURI = *v.ID, *v.Properties.VaultURI
	roles, err := armauthorization.NewRoleAssignmentsClient(sub, cred, opts)
	if err != nil {
		return err
	}
	if _, err := roles.Create(ctx, l.VaultID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.Authorization/roleDefinitions/" + officerRole),
			PrincipalID:      to.Ptr(owner), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil); err != nil {
		return fmt.Errorf("grant the owner Secrets Officer: %w", err)
	}
	sopts, err := l.Azure.SecretsOptions()
	if err != nil {
		return err
	}
	secrets, err := azsecrets.NewClient(l.VaultURI, cred, sopts)
	if err != nil {
		return err
	}
	l.SecretValue = "s3cr3t-" + uuid.NewString()[:8]
	if _, err := secrets.SetSecret(ctx, SecretName, azsecrets.SetSecretParameters{Value: to.Ptr(l.SecretValue)}, nil); err != nil {
		return fmt.Errorf("set secret: %w", err)
	}
	return nil
}
