package manager_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
