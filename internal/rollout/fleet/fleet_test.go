package fleet_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/rollout"
	"github.com/cerulean/cerulean/internal/rollout/fleet"
)

// What `up` does on every start, twice on the same cloud (a restart): the clusters keep their
// ids and issuers, the vault keeps its secret and its owner's one role assignment, and the
// rollout file written is one `cerulean rollout` loads.
func TestFleetResumesOnTheSameCloud(t *testing.T) {
	ctx := t.Context()
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	cfg := fleet.AzureConfig(az)
	cred, err := cfg.Credential()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := armcontainerservice.NewManagedClustersClient(cfg.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}

	specs := []fleet.Cluster{
		{ResourceGroup: "rg", Name: "aks-on", Location: "local", Issuer: "https://127.0.0.1:1001", OIDCIssuer: true},
		{ResourceGroup: "rg", Name: "aks-off", Location: "local", Issuer: "https://127.0.0.1:1002"},
	}
	var ids []string
	for range 2 {
		ids = ids[:0]
		for _, c := range specs {
			id, err := fleet.Register(ctx, az, c)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	for i, c := range specs {
		if !strings.HasSuffix(ids[i], "/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/"+c.Name) {
			t.Errorf("cluster %s: id %s", c.Name, ids[i])
		}
		mc, err := clusters.Get(ctx, "rg", c.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := mc.Properties.OidcIssuerProfile
		on := p != nil && p.Enabled != nil && *p.Enabled
		if on != c.OIDCIssuer {
			t.Errorf("cluster %s: OIDC issuer enabled %v, want %v", c.Name, on, c.OIDCIssuer)
		}
		if c.OIDCIssuer && (p.IssuerURL == nil || *p.IssuerURL != c.Issuer) {
			t.Errorf("cluster %s: issuer %v, want its own %s", c.Name, p.IssuerURL, c.Issuer)
		}
	}

	first, err := fleet.EnsureVault(ctx, az, fleet.Vault{ResourceGroup: "rg", Name: "kv-fleet", Location: "local", SecretName: "s", SecretValue: "first", KeepSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := fleet.EnsureVault(ctx, az, fleet.Vault{ResourceGroup: "rg", Name: "kv-fleet", Location: "local", SecretName: "s", SecretValue: "second", KeepSecret: true})
	if err != nil {
		t.Fatalf("second EnsureVault: %v", err)
	}
	if again.ID != first.ID || again.URI != first.URI || again.SecretValue != "first" {
		t.Errorf("second EnsureVault: %+v, want the first's vault and secret %+v", again, first)
	}
	sopts, err := cfg.SecretsOptions()
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := azsecrets.NewClient(first.URI, cred, sopts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := secrets.GetSecret(ctx, "s", "", nil)
	if err != nil || got.Value == nil || *got.Value != "first" {
		t.Errorf("the vault's secret after a second EnsureVault: %v %v, want the first value kept", got.Value, err)
	}
	roles, err := armauthorization.NewRoleAssignmentsClient(cfg.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	pager := roles.NewListForScopePager(first.ID, &armauthorization.RoleAssignmentsClientListForScopeOptions{Filter: to.Ptr("atScope()")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Value {
			if a.Properties != nil && a.Properties.PrincipalID != nil && *a.Properties.PrincipalID == az.Settings().ObjectID &&
				a.Properties.Scope != nil && strings.EqualFold(*a.Properties.Scope, first.ID) {
				n++
			}
		}
	}
	if n != 1 {
		t.Errorf("the owner has %d role assignments on the vault after two EnsureVault, want 1", n)
	}

	path := filepath.Join(t.TempDir(), "rollout.yaml")
	chart := t.TempDir()
	if err := fleet.WriteRolloutFile(path, rollout.Config{
		Clusters: []rollout.Cluster{{ID: ids[0]}, {ID: ids[1]}},
		KeyVault: rollout.KeyVault{ID: first.ID}, Role: "Key Vault Secrets User",
		App: rollout.App{Chart: chart}, Namespace: "app", ServiceAccount: "app",
	}); err != nil {
		t.Fatal(err)
	}
	loaded, err := rollout.Load(path)
	if err != nil {
		t.Fatalf("load the rollout file written: %v", err)
	}
	if len(loaded.Clusters) != 2 || loaded.Clusters[1].Name() != "aks-off" {
		t.Errorf("loaded %+v", loaded.Clusters)
	}
}
