package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
)

// Deleting a CRD while the manager runs detaches its objects: they go away in Kubernetes and
// their Azure resources stay (the safe uninstall of docs/resources.md).
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
