package manager_test

import (
	"reflect"
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

// Azure Service Operator's older ManagedCluster versions are served with the stored one's
// schema (conversion None): a cluster written at each goes Ready, and read at the stored
// version it holds the same spec, fields Cerulean does not name (agentPoolProfiles) included.
func TestManagedClusterOlderVersions(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	create(t, c, ns, resourceGroup("aks-versions-rg", nil))
	for _, v := range []string{"v1api20230201", "v1api20231001", "v1api20240402preview"} {
		mc := obj("containerservice.azure.com/"+v, "ManagedCluster", "aks-"+v, map[string]any{
			"location": "westus2", "owner": map[string]any{"name": "aks-versions-rg"}, "dnsPrefix": "aks-" + v,
			"agentPoolProfiles": []any{map[string]any{"name": "pool1", "count": int64(1), "vmSize": "Standard_DS2_v2", "mode": "System"}},
			"identity":          map[string]any{"type": "SystemAssigned"},
			"oidcIssuerProfile": map[string]any{"enabled": true},
			"securityProfile":   map[string]any{"workloadIdentity": map[string]any{"enabled": true}},
		})
		create(t, c, ns, mc)
		written := waitReady(t, c, mc, time.Minute)
		stored := &unstructured.Unstructured{}
		stored.SetAPIVersion("containerservice.azure.com/v1api20240901")
		stored.SetKind("ManagedCluster")
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: mc.GetName()}, stored); err != nil {
			t.Fatalf("read %s at the stored version: %v", mc.GetName(), err)
		}
		if !reflect.DeepEqual(written.Object["spec"], stored.Object["spec"]) {
			t.Errorf("%s: spec at %s %v, at v1api20240901 %v", mc.GetName(), v, written.Object["spec"], stored.Object["spec"])
		}
		if issuer, _, _ := unstructured.NestedString(stored.Object, "status", "oidcIssuerProfile", "issuerURL"); issuer == "" {
			t.Errorf("%s written at %s has no issuer URL in status", mc.GetName(), v)
		}
	}
}
