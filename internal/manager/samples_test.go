package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// The ASO-style manifest set of config/samples goes Ready; status and the exported ConfigMaps
// and Secrets hold what ARM holds; steady state makes no PUT over three sync periods; drift
// made directly in the cloud is corrected; a spec update is applied with one fresh token.
func TestSamplesReadyExportsSteadyStateAndDrift(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const syncPeriod = 2 * time.Second
	startManager(t, az, syncPeriod, ns)

	objs := samples(t)
	create(t, c, ns, objs...)
	got := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		got[u.GetKind()] = waitReady(t, c, u, 2*time.Minute)
	}

	s := az.Settings()
	cred := cloudtest.OwnerCred(t, az)
	opts := cloudtest.ARMOptions(az)
	rgName := "sample-rg"

	// The identity: status and the exported ConfigMap equal what ARM holds.
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ids.Get(t.Context(), rgName, "sample-identity", nil)
	if err != nil {
		t.Fatalf("identity not in ARM: %v", err)
	}
	uai := got["UserAssignedIdentity"]
	for field, want := range map[string]string{"clientId": *id.Properties.ClientID, "principalId": *id.Properties.PrincipalID, "tenantId": *id.Properties.TenantID, "id": *id.ID} {
		if v, _, _ := unstructured.NestedString(uai.Object, "status", field); !strings.EqualFold(v, want) {
			t.Errorf("identity status.%s = %q, ARM holds %q", field, v, want)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "sample-identity"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["clientId"] != *id.Properties.ClientID || cm.Data["principalId"] != *id.Properties.PrincipalID || cm.Data["tenantId"] != *id.Properties.TenantID {
		t.Errorf("exported ConfigMap %v, ARM holds clientId %s principalId %s", cm.Data, *id.Properties.ClientID, *id.Properties.PrincipalID)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != uai.GetUID() {
		t.Errorf("exported ConfigMap owners %v, want the identity", cm.OwnerReferences)
	}

	// The federated credential names the cluster's issuer, read from the ConfigMap.
	fic, err := armmsi.NewFederatedIdentityCredentialsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fic.Get(t.Context(), rgName, "sample-identity", "sample-fic", nil)
	if err != nil {
		t.Fatalf("federated credential not in ARM: %v", err)
	}
	issuer, _, _ := unstructured.NestedString(got["FederatedIdentityCredential"].Object, "status", "issuer")
	if *f.Properties.Issuer != issuer || issuer == "" {
		t.Errorf("federated credential issuer: ARM %q, status %q", *f.Properties.Issuer, issuer)
	}

	// The role assignment grants Reader to the identity's principal, read from the export.
	ra := got["RoleAssignment"]
	raID, _, _ := unstructured.NestedString(ra.Object, "status", "id")
	principal, _, _ := unstructured.NestedString(ra.Object, "status", "principalId")
	roleDef, _, _ := unstructured.NestedString(ra.Object, "status", "roleDefinitionId")
	if principal != *id.Properties.PrincipalID || !strings.HasPrefix(strings.ToLower(raID), strings.ToLower("/subscriptions/"+s.SubscriptionID+"/resourceGroups/sample-rg/providers/Microsoft.Authorization/roleAssignments/")) {
		t.Errorf("role assignment status id %q principal %q", raID, principal)
	}
	if !strings.HasSuffix(roleDef, "acdd72a7-3385-48ef-bd42-f606fba81ae7") { // Reader
		t.Errorf("role assignment roleDefinitionId %q is not Reader's", roleDef)
	}

	// The storage account's keys and endpoint reach the Secret.
	accounts, err := armstorage.NewAccountsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := accounts.ListKeys(t.Context(), rgName, "ceruleansample", nil)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "sample-storage"}, sec); err != nil {
		t.Fatal(err)
	}
	blob, _, _ := unstructured.NestedString(got["StorageAccount"].Object, "status", "primaryEndpoints", "blob")
	if string(sec.Data["key1"]) != *keys.Keys[0].Value || string(sec.Data["blobEndpoint"]) != blob || blob == "" {
		t.Errorf("storage secret has key1 %t, blobEndpoint %q (status %q)", string(sec.Data["key1"]) == *keys.Keys[0].Value, sec.Data["blobEndpoint"], blob)
	}
	vaultURI, _, _ := unstructured.NestedString(got["Vault"].Object, "status", "properties", "vaultUri")
	if vaultURI == "" {
		t.Errorf("vault status has no vaultUri")
	}

	// Steady state: three sync periods, reads only, and no new Event (Events mark transitions).
	log := az.RequestLog()
	since := log.Last()
	eventsBefore := settledEvents(t, c, ns)
	time.Sleep(3*syncPeriod + syncPeriod/2)
	if n := countEvents(t, c, ns); n != eventsBefore || n == 0 {
		t.Errorf("Events: %d before the steady state, %d after; want the same, non-zero", eventsBefore, n)
	}
	puts := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since})
	gets := log.Count(reqlog.Filter{Service: "arm", Method: "GET", Since: since})
	if puts != 0 {
		t.Errorf("steady state sent %d PUTs over three sync periods, want 0", puts)
	}
	if gets < len(objs) {
		t.Errorf("steady state sent %d GETs over three sync periods, want at least one per resource (%d)", gets, len(objs))
	}
	t.Logf("steady state over 3 periods: %d GETs, %d PUTs for %d resources", gets, puts, len(objs))

	// Drift made in the cloud is corrected: a tag removed from the resource group.
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	loc := "westus2"
	if _, err := groups.CreateOrUpdate(t.Context(), rgName, armresources.ResourceGroup{Location: &loc, Tags: map[string]*string{}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "drift corrected", func() (bool, string) {
		g, err := groups.Get(t.Context(), rgName, nil)
		if err != nil {
			return false, err.Error()
		}
		if v := g.Tags["app"]; v != nil && *v == "sample" {
			return true, ""
		}
		return false, "tags still drifted"
	})

	// An update: one PUT, one fresh token for it.
	waitReady(t, c, objs[0], time.Minute)
	since = log.Last()
	rg := get(t, c, ns, rgName, objs[0])
	if err := unstructured.SetNestedField(rg.Object, "v2", "spec", "tags", "version"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(t.Context(), rg); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "update applied", func() (bool, string) {
		g, err := groups.Get(t.Context(), rgName, nil)
		if err != nil {
			return false, err.Error()
		}
		if v := g.Tags["version"]; v != nil && *v == "v2" {
			return true, ""
		}
		return false, "tag not applied"
	})
	time.Sleep(syncPeriod)
	putsNow := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since})
	tokens := 0
	for _, e := range log.Entries(reqlog.Filter{Service: "entra", Method: "POST", Since: since}) {
		if strings.HasSuffix(e.Path, "/token") {
			tokens++
		}
	}
	if putsNow != 1 || tokens != putsNow {
		t.Errorf("the update sent %d PUTs with %d token requests; want 1 and one token per PUT", putsNow, tokens)
	}
}

// settledEvents waits until the recorder (asynchronous) has delivered every Event so far.
func settledEvents(t *testing.T, c client.Client, ns string) int {
	t.Helper()
	last, same := -1, 0
	for same < 10 {
		n := countEvents(t, c, ns)
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

func countEvents(t *testing.T, c client.Client, ns string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.ReportingController == "cerulean-manager" || e.DeprecatedSource.Component == "cerulean-manager" {
			n++
		}
	}
	return n
}
