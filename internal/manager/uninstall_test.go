package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
)

// Deleting a CRD while the manager runs detaches its objects: they go away in Kubernetes and
// their Azure resources stay (the safe uninstall of docs/install.md).
func TestCRDDeletionDetaches(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	t.Cleanup(func() {
		if err := manager.InstallCRDs(context.Background(), devenvtest.ControlPlane(t).RESTConfig); err != nil {
			t.Errorf("reinstall CRDs: %v", err)
		}
	})
	rg := resourceGroup("uninstall-rg", nil)
	sa := obj("storage.azure.com/v1api20230101", "StorageAccount", "uninstall-sa", map[string]any{
		"location": "westus2", "azureName": "ceruleanuninstall", "owner": map[string]any{"name": "uninstall-rg"},
		"kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"},
	})
	create(t, c, ns, rg, sa)
	waitReady(t, c, sa, time.Minute)
	since := az.RequestLog().Last()

	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("storageaccounts.storage.azure.com")
	if err := c.Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "CRD deleted", func() (bool, string) {
		err := c.Get(t.Context(), client.ObjectKeyFromObject(crd), crd.DeepCopy())
		return apierrors.IsNotFound(err), "CRD still there"
	})
	accounts, err := armstorage.NewAccountsClient(az.Settings().SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.GetProperties(t.Context(), "uninstall-rg", "ceruleanuninstall", nil); err != nil {
		t.Errorf("the storage account is gone from Azure after its CRD was deleted: %v", err)
	}
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "DELETE", Since: since}); n != 0 {
		t.Errorf("%d DELETEs reached ARM during the uninstall", n)
	}
}

// Deleting the ControlPlaneIdentities CRD while the manager runs detaches its objects too: the
// components' Key Vault secrets stay (their pods keep working).
func TestCRDDeletionDetachesControlPlaneIdentities(t *testing.T) {
	c := kube(t)
	installSPCCRD(t, c)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startCPIManager(t, az, time.Now, ns)
	t.Cleanup(func() {
		if err := manager.InstallCRDs(context.Background(), devenvtest.ControlPlane(t).RESTConfig); err != nil {
			t.Errorf("reinstall CRDs: %v", err)
		}
	})
	objs := sampleObjects(t, az)
	create(t, c, ns, objs...)
	var vaultURI string
	eventually(t, 2*time.Minute, "ControlPlaneIdentities Ready", func() (bool, string) {
		o := getCPI(t, c, ns, "hcp")
		rc := meta.FindStatusCondition(o.Status.Conditions, cpv1.ConditionReady)
		if rc == nil || len(o.Status.Components) == 0 {
			return false, "no condition"
		}
		vaultURI = o.Status.Components[0].VaultURI
		return rc.Status == metav1.ConditionTrue, rc.Reason + ": " + rc.Message
	})
	since := az.RequestLog().Last()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("controlplaneidentities.cerulean.dev")
	if err := c.Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "CRD deleted", func() (bool, string) {
		err := c.Get(t.Context(), client.ObjectKeyFromObject(crd), crd.DeepCopy())
		return apierrors.IsNotFound(err), "CRD still there"
	})
	if n := az.RequestLog().Count(reqlog.Filter{Service: "keyvault", Method: "DELETE", Since: since}); n != 0 {
		t.Errorf("%d Key Vault DELETEs during the uninstall", n)
	}
	secrets, err := azsecrets.NewClient(vaultURI, cloudtest.OwnerCred(t, az), &azsecrets.ClientOptions{ClientOptions: az.ClientOptions(), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.GetSecret(t.Context(), "managed-azure-cpo", "", nil); err != nil {
		t.Errorf("the component's secret is gone after the CRD was deleted: %v", err)
	}
}
