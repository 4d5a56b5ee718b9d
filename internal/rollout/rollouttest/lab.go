// Package rollouttest sets up what `cerulean rollout` rolls out to, in the local cloud: managed
// clusters bound to real local control planes (each cluster's issuer is its control plane's),
// a shared RBAC Key Vault holding a secret, and a rollout file naming them with the test app's
// chart. The rollout tests and the benchmark share it; its functions return errors.
package rollouttest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/rollout"
	"github.com/cerulean/cerulean/internal/rollout/examplechart"
	"github.com/cerulean/cerulean/internal/rollout/fleet"
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
)

// Lab is a set of clusters and a vault in the cloud, and the rollout file that names them.
type Lab struct {
	// File is the rollout file's path.
	File string
	// Azure is the bootstrap principal's configuration (what `cerulean-local cloud env` gives).
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
	// Chart is the app's chart; empty means the example chart (ChartDir).
	Chart string
	// Namespace is the app's namespace; empty means Namespace ("app").
	Namespace string
}

// AzureConfig is the cloud's bootstrap principal as the standard environment names it.
func AzureConfig(az *cloud.Cloud) azure.Config { return fleet.AzureConfig(az) }

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

// ChartDir is the example app's chart (internal/rollout/examplechart).
func ChartDir() string { return examplechart.Dir() }

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
	shared := o.Clusters > len(o.Planes)
	ns := o.Namespace
	if ns == "" {
		ns = Namespace
	}
	var fcs []rollout.Cluster
	for i := range o.Clusters {
		name := ClusterName(i)
		cp := o.Planes[i%len(o.Planes)]
		id, err := fleet.Register(ctx, az, fleet.Cluster{ResourceGroup: ClusterGroup, Name: name, Location: Location, Issuer: cp.IssuerURL})
		if err != nil {
			return nil, err
		}
		l.ClusterIDs = append(l.ClusterIDs, id)
		l.Planes[i] = cp
		fc := rollout.Cluster{ID: id, Kubeconfig: cp.Kubeconfig}
		if shared {
			fc.Namespace = ns + "-" + name
		}
		fcs = append(fcs, fc)
	}
	vault, err := fleet.EnsureVault(ctx, az, fleet.Vault{
		ResourceGroup: SharedGroup, Name: "ro" + strings.ReplaceAll(uuid.NewString(), "-", "")[:14], Location: Location,
		SecretName: SecretName, SecretValue: "s3cr3t-" + uuid.NewString()[:8],
	})
	if err != nil {
		return nil, err
	}
	l.VaultID, l.VaultURI, l.SecretValue = vault.ID, vault.URI, vault.SecretValue
	chart := o.Chart
	if chart == "" {
		chart = ChartDir()
	}
	l.File = filepath.Join(o.Dir, "rollout.yaml")
	if err := fleet.WriteRolloutFile(l.File, rollout.Config{
		Clusters: fcs,
		KeyVault: rollout.KeyVault{ID: l.VaultID, VerifySecret: SecretName},
		Role:     Role,
		Identity: rollout.Identity{Suffix: "-app"},
		App: rollout.App{
			Chart:  chart,
			Values: map[string]any{"vault": map[string]any{"url": l.VaultURI, "secret": SecretName}},
		},
		Namespace:      ns,
		ServiceAccount: ServiceAccount,
	}); err != nil {
		return nil, err
	}
	return l, nil
}
