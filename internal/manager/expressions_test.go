package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// configMapExpressions and secretExpressions (CEL over the resource) are written with the
// values Azure returned; a bad expression is terminal (severity Error) with a message naming it.
func TestExportExpressions(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	rg := resourceGroup("cel-rg", nil)
	id := obj(msiAPI, "UserAssignedIdentity", "cel-identity", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "cel-rg"},
		"operatorSpec": map[string]any{
			"configMapExpressions": []any{map[string]any{"name": "cel-out", "key": "client", "value": "self.status.clientId"}},
			"secretExpressions":    []any{map[string]any{"name": "cel-secret", "key": "login", "value": `self.status.tenantId + "/" + self.status.clientId`}},
		},
	})
	bad := obj(msiAPI, "UserAssignedIdentity", "cel-bad", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "cel-rg"},
		"operatorSpec": map[string]any{
			"configMapExpressions": []any{map[string]any{"name": "cel-bad", "key": "x", "value": "self.status.noSuchField +"}},
		},
	})
	create(t, c, ns, rg, id, bad)
	got := waitReady(t, c, id, time.Minute)
	clientID, _, _ := unstructured.NestedString(got.Object, "status", "clientId")
	tenantID, _, _ := unstructured.NestedString(got.Object, "status", "tenantId")
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cel-out"}, cm); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cel-secret"}, sec); err != nil {
		t.Fatal(err)
	}
	if cm.Data["client"] != clientID || clientID == "" || string(sec.Data["login"]) != tenantID+"/"+clientID {
		t.Errorf("expressions exported %v and %q; status clientId %q tenantId %q", cm.Data, sec.Data["login"], clientID, tenantID)
	}
	eventually(t, time.Minute, "bad expression reported", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "cel-bad", bad))
		return st == "False" && sev == "Error" && reason == "ReconciliationFailedPermanently" && strings.Contains(msg, "cel-bad"),
			st + " " + sev + " " + reason + ": " + msg
	})
}

// A StorageAccount's secretExpressions read its account keys through `secret` (as ASO's do):
// the exported values are the keys ARM lists, and a connection string built from them.
func TestStorageSecretExpressionsReadKeys(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	rg := resourceGroup("cel-keys-rg", nil)
	sa := obj("storage.azure.com/v1api20230101", "StorageAccount", "cel-storage", map[string]any{
		"location": "westus2", "azureName": "ceruleancelkeys", "owner": map[string]any{"name": "cel-keys-rg"},
		"kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"},
		"operatorSpec": map[string]any{"secretExpressions": []any{
			map[string]any{"name": "cel-storage", "key": "primary", "value": "secret.key1"},
			map[string]any{"name": "cel-storage", "key": "conn", "value": `"AccountName=" + self.spec.azureName + ";AccountKey=" + secret.key2`},
		}},
	})
	create(t, c, ns, rg, sa)
	waitReady(t, c, sa, time.Minute)

	accounts, err := armstorage.NewAccountsClient(az.Settings().SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := accounts.ListKeys(t.Context(), "cel-keys-rg", "ceruleancelkeys", nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, k := range keys.Keys {
		byName[*k.KeyName] = *k.Value
	}
	if byName["key1"] == "" || byName["key2"] == "" {
		t.Fatalf("ARM listed keys %v", len(byName))
	}
	sec := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cel-storage"}, sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["primary"]) != byName["key1"] {
		t.Errorf("secret.key1 exported is not the account's key1")
	}
	if string(sec.Data["conn"]) != "AccountName=ceruleancelkeys;AccountKey="+byName["key2"] {
		t.Errorf("connection string exported is not built from the account's key2")
	}
}
