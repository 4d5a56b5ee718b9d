package manager_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// Secret exports go to a Key Vault when the resource names one: one secret
// <kind>-<namespace>-<name> holding a JSON map, written with only Key Vault Secrets Officer on
// the vault (granted here through a RoleAssignment manifest); no Kubernetes Secret is made.
func TestSecretExportsToKeyVault(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	s := az.Settings()

	rg := resourceGroup("kv-rg", nil)
	vault := obj("keyvault.azure.com/v1api20230701", "Vault", "export-kv", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "kv-rg"},
		"properties": map[string]any{"tenantId": s.TenantID, "sku": map[string]any{"family": "A", "name": "standard"}, "enableRbacAuthorization": true},
	})
	grant := obj("authorization.azure.com/v1api20220401", "RoleAssignment", "manager-secrets-officer", map[string]any{
		"owner":       map[string]any{"name": "export-kv", "group": "keyvault.azure.com", "kind": "Vault"},
		"principalId": s.ObjectID, "principalType": "ServicePrincipal",
		"roleDefinitionReference": map[string]any{"wellKnownName": "Key Vault Secrets Officer"},
	})
	create(t, c, ns, rg, vault, grant)
	waitReady(t, c, grant, time.Minute)
	v := waitReady(t, c, vault, time.Minute)
	uri, _, _ := unstructured.NestedString(v.Object, "status", "properties", "vaultUri")
	if uri == "" {
		t.Fatal("vault has no vaultUri")
	}

	sa := obj("storage.azure.com/v1api20230101", "StorageAccount", "kv-storage", map[string]any{
		"location": "westus2", "azureName": "ceruleankvexport", "owner": map[string]any{"name": "kv-rg"},
		"kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"},
		"operatorSpec": map[string]any{"secrets": map[string]any{
			"key1":         map[string]any{"name": "kv-storage", "key": "key1"},
			"blobEndpoint": map[string]any{"name": "kv-storage", "key": "blobEndpoint"},
		}},
	})
	sa.SetAnnotations(map[string]string{"cerulean.dev/export-key-vault": uri})
	create(t, c, ns, sa)
	waitReady(t, c, sa, time.Minute)

	secrets, err := azsecrets.NewClient(uri, cloudtest.OwnerCred(t, az), &azsecrets.ClientOptions{ClientOptions: az.ClientOptions(), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := secrets.GetSecret(t.Context(), "storageaccount-"+ns+"-kv-storage", "", nil)
	if err != nil {
		t.Fatalf("read the exported Key Vault secret: %v", err)
	}
	var vals map[string]string
	if err := json.Unmarshal([]byte(*got.Value), &vals); err != nil || got.ContentType == nil || *got.ContentType != "application/json" {
		t.Fatalf("exported secret is not a JSON map (%v, content type %v)", err, got.ContentType)
	}
	accounts, err := armstorage.NewAccountsClient(s.SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := accounts.ListKeys(t.Context(), "kv-rg", "ceruleankvexport", nil)
	if err != nil {
		t.Fatal(err)
	}
	if vals["key1"] != *keys.Keys[0].Value || vals["blobEndpoint"] == "" {
		t.Errorf("Key Vault export has key1 %t and blobEndpoint %q", vals["key1"] == *keys.Keys[0].Value, vals["blobEndpoint"])
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "kv-storage"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Kubernetes Secret was written too: %v", err)
	}
}
