package manager_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	ceruleanv1alpha1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// Azure Service Operator's Vault createModes, against soft-deleted vaults in the cloud:
// createOrRecover creates when nothing is deleted and recovers a soft-deleted vault (its
// secrets are back); purgeThenCreate creates when nothing is deleted and purges a soft-deleted
// vault first (its secrets are gone). In the steady state neither sends a PUT nor looks for
// deleted vaults.
func TestVaultCreateModes(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const syncPeriod = 2 * time.Second
	startManager(t, az, syncPeriod, ns)
	s := az.Settings()
	cred := cloudtest.OwnerCred(t, az)
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, cred, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, ns, resourceGroup("cm-rg", nil))
	// Access policies, not Azure RBAC: a recovered vault keeps its properties, where role
	// assignments on it would have gone with it.
	vault := func(name, mode string) *unstructured.Unstructured {
		return obj("keyvault.azure.com/v1api20230701", "Vault", name, map[string]any{
			"location": "westus2", "owner": map[string]any{"name": "cm-rg"},
			"properties": map[string]any{
				"tenantId": s.TenantID, "sku": map[string]any{"family": "A", "name": "standard"}, "createMode": mode,
				"accessPolicies": []any{map[string]any{"tenantId": s.TenantID, "objectId": s.ObjectID,
					"permissions": map[string]any{"secrets": []any{"get", "set", "list"}}}},
			},
		})
	}
	secrets := func(u *unstructured.Unstructured) *azsecrets.Client {
		uri, _, _ := unstructured.NestedString(u.Object, "status", "properties", "vaultUri")
		sc, err := azsecrets.NewClient(uri, cred, &azsecrets.ClientOptions{ClientOptions: az.ClientOptions(), DisableChallengeResourceVerification: true})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	softDelete := func(u *unstructured.Unstructured) {
		t.Helper()
		if err := c.Delete(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, u, time.Minute)
		if _, err := vaults.GetDeleted(t.Context(), u.GetName(), "westus2", nil); err != nil {
			t.Fatalf("the deleted vault %s is not soft-deleted: %v", u.GetName(), err)
		}
	}
	log := az.RequestLog()
	lookups := reqlog.Filter{Service: "arm", PathPrefix: "/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.KeyVault/locations/"}

	// Nothing deleted: both modes create.
	recoverable, fresh := vault("cm-recover", "createOrRecover"), vault("cm-purge", "purgeThenCreate")
	create(t, c, ns, recoverable, fresh)
	got := waitReady(t, c, recoverable, time.Minute)
	waitReady(t, c, fresh, time.Minute)
	for _, u := range []*unstructured.Unstructured{recoverable, fresh} {
		if _, err := vaults.Get(t.Context(), "cm-rg", u.GetName(), nil); err != nil {
			t.Fatalf("vault %s not created: %v", u.GetName(), err)
		}
	}
	if _, err := secrets(got).SetSecret(t.Context(), "kept", azsecrets.SetSecretParameters{Value: to.Ptr("across-recovery")}, nil); err != nil {
		t.Fatal(err)
	}

	// Steady state: no PUT and no deleted-vault lookup.
	since := log.Last()
	time.Sleep(3*syncPeriod + syncPeriod/2)
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); n != 0 {
		t.Errorf("steady state sent %d PUTs over three sync periods, want 0", n)
	}
	if n := log.Count(reqlog.Filter{Service: lookups.Service, PathPrefix: lookups.PathPrefix, Since: since}); n != 0 {
		t.Errorf("steady state sent %d deleted-vault requests, want 0", n)
	}
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "GET", Since: since}); n < 2 {
		t.Errorf("steady state sent %d GETs, want the vaults read back", n)
	}

	// createOrRecover over a soft-deleted vault recovers it, secrets and all.
	softDelete(recoverable)
	recoverable = vault("cm-recover", "createOrRecover")
	create(t, c, ns, recoverable)
	got = waitReady(t, c, recoverable, time.Minute)
	if v, err := secrets(got).GetSecret(t.Context(), "kept", "", nil); err != nil || *v.Value != "across-recovery" {
		t.Errorf("the recovered vault's secret: %v", err)
	}

	// purgeThenCreate over a soft-deleted vault purges it: a new vault, without its secrets.
	if _, err := secrets(get(t, c, ns, "cm-purge", fresh)).SetSecret(t.Context(), "gone", azsecrets.SetSecretParameters{Value: to.Ptr("purged")}, nil); err != nil {
		t.Fatal(err)
	}
	softDelete(fresh)
	fresh = vault("cm-purge", "purgeThenCreate")
	create(t, c, ns, fresh)
	got = waitReady(t, c, fresh, time.Minute)
	_, err = secrets(got).GetSecret(t.Context(), "gone", "", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		t.Errorf("a secret of the purged vault: %v, want 404", err)
	}
	if _, err := vaults.GetDeleted(t.Context(), "cm-purge", "westus2", nil); !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		t.Errorf("the soft-deleted vault after purgeThenCreate: %v, want 404", err)
	}
	since = log.Last()
	time.Sleep(2 * syncPeriod)
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); n != 0 {
		t.Errorf("%d PUTs after the recovery and the purge settled, want 0", n)
	}
}

// softDeletedVault creates vault name in a resource group of its own (rg) outside the manager
// and deletes it, so that Azure holds it soft-deleted with rg in its original id.
func softDeletedVault(t *testing.T, az *cloud.Cloud, rg, name string) {
	t.Helper()
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	cloudtest.CreateGroup(t, az, cred, opts, "westus2", rg)
	cloudtest.CreateRBACVault(t, az, cred, opts, "westus2", rg, name)
	vaults, err := armkeyvault.NewVaultsClient(az.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vaults.Delete(t.Context(), rg, name, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := vaults.GetDeleted(t.Context(), name, "westus2", nil); err != nil {
		t.Fatalf("vault %s not soft-deleted: %v", name, err)
	}
}

// rbacVault is a Vault object in resource group owner with the given createMode.
func rbacVault(tenantID, name, owner, mode string) *unstructured.Unstructured {
	return obj("keyvault.azure.com/v1api20230701", "Vault", name, map[string]any{
		"location": "westus2", "owner": map[string]any{"name": owner},
		"properties": map[string]any{
			"tenantId": tenantID, "sku": map[string]any{"family": "A", "name": "standard"},
			"createMode": mode, "enableRbacAuthorization": true,
		},
	})
}

// createOrRecover over a vault soft-deleted from another resource group is refused, as Azure
// Service Operator refuses it (Azure recovers a vault only at its original id): a permanent
// failure naming both groups, and no PUT of the vault is sent.
func TestVaultCreateOrRecoverOtherGroup(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, 2*time.Second, ns)
	s := az.Settings()
	softDeletedVault(t, az, "cmo-old-rg", "cmo-vault")

	log := az.RequestLog()
	since := log.Last()
	create(t, c, ns, resourceGroup("cmo-new-rg", nil))
	v := rbacVault(s.TenantID, "cmo-vault", "cmo-new-rg", "createOrRecover")
	create(t, c, ns, v)
	eventually(t, time.Minute, "createOrRecover refused", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, v.GetName(), v))
		return st == "False" && sev == "Error" && reason == "ReconciliationFailedPermanently" &&
				strings.Contains(msg, "cmo-old-rg") && strings.Contains(msg, "cmo-new-rg"),
			st + " " + sev + " " + reason + ": " + msg
	})
	vaultPath := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/cmo-new-rg/providers/Microsoft.KeyVault/vaults/cmo-vault"
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", PathPrefix: vaultPath, Since: since}); n != 0 {
		t.Errorf("%d PUTs of the vault sent, want 0", n)
	}
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vaults.GetDeleted(t.Context(), "cmo-vault", "westus2", nil); err != nil {
		t.Errorf("the soft-deleted vault after the refusal: %v, want it still there", err)
	}
}

// purgeThenCreate purges only a deleted vault whose original scope the namespace's
// NamespaceGrant covers: a vault deleted from a group the tenant was not granted is another
// team's, and purging it would destroy that team's secrets. Refused as NotGranted, nothing
// purged, no PUT.
func TestVaultPurgeThenCreateNotGranted(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := bareNamespace(t)
	s := az.Settings()
	sub := "/subscriptions/" + s.SubscriptionID
	g := &ceruleanv1alpha1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "grant-" + ns},
		Spec: ceruleanv1alpha1.NamespaceGrantSpec{Namespaces: []string{ns}, Scopes: []string{sub + "/resourceGroups/cmp-mine-rg"}}}
	if err := c.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
	startManager(t, az, 2*time.Second, ns)
	softDeletedVault(t, az, "cmp-theirs-rg", "cmp-vault")

	log := az.RequestLog()
	since := log.Last()
	rg := resourceGroup("cmp-mine-rg", nil)
	create(t, c, ns, rg)
	waitReady(t, c, rg, time.Minute)
	v := rbacVault(s.TenantID, "cmp-vault", "cmp-mine-rg", "purgeThenCreate")
	create(t, c, ns, v)
	eventually(t, time.Minute, "purgeThenCreate refused for want of a grant", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, v.GetName(), v))
		return st == "False" && sev == "Error" && reason == "NotGranted" && strings.Contains(msg, "cmp-theirs-rg"),
			st + " " + sev + " " + reason + ": " + msg
	})
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "POST", PathPrefix: sub + "/providers/Microsoft.KeyVault/locations/", Since: since}); n != 0 {
		t.Errorf("%d purge requests sent, want 0", n)
	}
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", PathPrefix: sub + "/resourceGroups/cmp-mine-rg/providers/Microsoft.KeyVault/", Since: since}); n != 0 {
		t.Errorf("%d PUTs of the vault sent, want 0", n)
	}
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vaults.GetDeleted(t.Context(), "cmp-vault", "westus2", nil); err != nil {
		t.Errorf("the other team's soft-deleted vault: %v, want it still there", err)
	}
}
