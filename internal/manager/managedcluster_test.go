package manager_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// A ManagedCluster written against the vYYYYMMDD version name turns on the OIDC issuer and
// workload identity, exports the issuer URL ARM holds, and passes the fields of ASO's schema
// Cerulean does not name through to ARM.
func TestManagedClusterExportsIssuer(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	rg := resourceGroup("aks-rg", nil)
	mc := obj("containerservice.azure.com/v20240901", "ManagedCluster", "aks", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "aks-rg"},
		"dnsPrefix":         "aks-sample",
		"oidcIssuerProfile": map[string]any{"enabled": true},
		"securityProfile":   map[string]any{"workloadIdentity": map[string]any{"enabled": true}},
		"operatorSpec": map[string]any{"configMaps": map[string]any{
			"oidcIssuerProfile": map[string]any{"name": "aks-issuer", "key": "issuer"},
		}},
	})
	create(t, c, ns, rg, mc)
	got := waitReady(t, c, mc, time.Minute)

	clusters, err := armcontainerservice.NewManagedClustersClient(az.Settings().SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := clusters.Get(t.Context(), "aks-rg", "aks", nil)
	if err != nil {
		t.Fatal(err)
	}
	issuer := *cl.Properties.OidcIssuerProfile.IssuerURL
	if status, _, _ := unstructured.NestedString(got.Object, "status", "oidcIssuerProfile", "issuerURL"); status != issuer {
		t.Errorf("status issuer %q, ARM %q", status, issuer)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "aks-issuer"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["issuer"] != issuer {
		t.Errorf("exported issuer %q, ARM holds %q", cm.Data["issuer"], issuer)
	}
	if cl.Properties.DNSPrefix == nil || *cl.Properties.DNSPrefix != "aks-sample" {
		t.Errorf("the unnamed ASO field dnsPrefix did not reach ARM: %v", cl.Properties.DNSPrefix)
	}
	if wi := cl.Properties.SecurityProfile.WorkloadIdentity; wi == nil || wi.Enabled == nil || !*wi.Enabled {
		t.Error("workload identity is not enabled in ARM")
	}
}
