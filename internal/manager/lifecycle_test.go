package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

const (
	rgAPI  = "resources.azure.com/v1api20200601"
	msiAPI = "managedidentity.azure.com/v1api20230131"
)

func resourceGroup(name string, annotations map[string]string) *unstructured.Unstructured {
	u := obj(rgAPI, "ResourceGroup", name, map[string]any{"location": "westus2"})
	u.SetAnnotations(annotations)
	return u
}

func groupExists(t *testing.T, az *cloud.Cloud, name string) bool {
	t.Helper()
	groups, err := armresources.NewResourceGroupsClient(az.Settings().SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := groups.CheckExistence(t.Context(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Success
}

// Deletion happens only when asked and as the policy says: manage deletes in Azure; skip only
// reads (no PUT) and keeps the resource; detach-on-delete keeps it; an existing resource is
// adopted; a resource never created is released at once.
func TestDeletionAndReconcilePolicies(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	sub := az.Settings().SubscriptionID
	log := az.RequestLog()

	// Pre-existing groups: one adopted by a managed object, one observed under skip.
	adoptedID := cloudtest.CreateGroup(t, az, cred, opts, "westus2", "adopted-rg")
	cloudtest.CreateGroup(t, az, cred, opts, "eastus", "skipped-rg")

	managed := resourceGroup("managed-rg", nil)
	adopted := resourceGroup("adopted-rg", nil)
	skipped := resourceGroup("skipped-rg", map[string]string{"serviceoperator.azure.com/reconcile-policy": "skip"})
	detached := resourceGroup("detached-rg", map[string]string{"serviceoperator.azure.com/reconcile-policy": "detach-on-delete"})
	orphan := obj(msiAPI, "UserAssignedIdentity", "orphan", map[string]any{"location": "westus2", "owner": map[string]any{"name": "no-such-rg"}})
	since := log.Last()
	create(t, c, ns, managed, adopted, skipped, detached, orphan)
	for _, u := range []*unstructured.Unstructured{managed, adopted, skipped, detached} {
		waitReady(t, c, u, time.Minute)
	}
	if got, _, _ := unstructured.NestedString(get(t, c, ns, "adopted-rg", adopted).Object, "status", "id"); !strings.EqualFold(got, adoptedID) {
		t.Errorf("adopted group status.id = %q, want %q", got, adoptedID)
	}
	sk := get(t, c, ns, "skipped-rg", skipped)
	if loc, _, _ := unstructured.NestedString(sk.Object, "status", "location"); loc != "eastus" {
		t.Errorf("skip: status.location = %q, want ARM's eastus (spec says westus2)", loc)
	}
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", PathPrefix: "/subscriptions/" + sub + "/resourceGroups/skipped-rg", Since: since}); n != 0 {
		t.Errorf("skip policy sent %d PUTs", n)
	}
	eventually(t, time.Minute, "orphan waits for its owner", func() (bool, string) {
		o := get(t, c, ns, "orphan", orphan)
		st, sev, reason, msg := ready(o)
		return st == "False" && sev == "Info" && reason == "WaitingForOwner", st + " " + sev + " " + reason + ": " + msg
	})
	// Events tell outcomes; progress (Reconciling, WaitingForOwner) is in status only.
	eventually(t, time.Minute, "managed-rg's Succeeded Event", func() (bool, string) { return eventSeen(t, c, ns, "managed-rg", "Normal/Succeeded") })
	for name, progress := range map[string]string{"managed-rg": "Normal/Reconciling", "orphan": "Normal/WaitingForOwner"} {
		if ok, _ := eventSeen(t, c, ns, name, progress); ok {
			t.Errorf("%s has a %s Event: progress is shown in status, not recorded", name, progress)
		}
	}

	deleteSince := log.Last()
	for _, u := range []*unstructured.Unstructured{managed, adopted, skipped, detached, orphan} {
		if err := c.Delete(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []*unstructured.Unstructured{managed, adopted, skipped, detached, orphan} {
		waitGone(t, c, u, time.Minute)
	}
	deleteEnd := log.Last() // the checks below request tokens of their own
	for name, want := range map[string]bool{"managed-rg": false, "adopted-rg": false, "skipped-rg": true, "detached-rg": true} {
		if got := groupExists(t, az, name); got != want {
			t.Errorf("after delete, group %s exists = %t, want %t", name, got, want)
		}
	}
	deletes := log.Entries(reqlog.Filter{Service: "arm", Method: "DELETE", Since: since})
	if len(deletes) != 2 {
		t.Errorf("%d DELETEs reached ARM, want 2 (managed-rg and adopted-rg)", len(deletes))
	}
	tokens := 0
	for _, e := range log.Entries(reqlog.Filter{Service: "entra", Method: "POST", Since: deleteSince}) {
		if strings.HasSuffix(e.Path, "/token") && e.Seq <= deleteEnd {
			tokens++
		}
	}
	if tokens != len(deletes) {
		t.Errorf("%d token requests for %d DELETEs, want one fresh token per DELETE", tokens, len(deletes))
	}
	for _, e := range deletes {
		if strings.Contains(e.Path, "skipped-rg") || strings.Contains(e.Path, "detached-rg") || strings.Contains(e.Path, "orphan") {
			t.Errorf("a DELETE went to %s", e.Path)
		}
	}
}

// A manager restarted in the middle of a slow create resumes the recorded operation: exactly
// one PUT reaches ARM.
func TestRestartDuringSlowCreateSendsOnePut(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	if err := az.Faults().Set(faults.Config{Rules: []faults.Rule{{
		Method: "PUT", ResourceType: "Microsoft.ManagedIdentity/userAssignedIdentities", LRO: &faults.LRO{Polls: 40},
	}}}); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, c)
	stop := startManager(t, az, time.Minute, ns)
	rg := resourceGroup("slow-rg", nil)
	id := obj(msiAPI, "UserAssignedIdentity", "slow-identity", map[string]any{"location": "westus2", "owner": map[string]any{"name": "slow-rg"}})
	create(t, c, ns, rg, id)
	eventually(t, time.Minute, "operation recorded", func() (bool, string) {
		a := get(t, c, ns, "slow-identity", id).GetAnnotations()
		return a["serviceoperator.azure.com/poller-resume-token"] != "", "no resume token yet"
	})
	stop()
	st, _, reason, _ := ready(get(t, c, ns, "slow-identity", id))
	if st == "True" {
		t.Fatal("the create finished before the restart; the test proves nothing")
	}
	t.Logf("stopped the manager while %s", reason)
	startManager(t, az, time.Minute, ns)
	got := waitReady(t, c, id, 2*time.Minute)
	path := "/subscriptions/" + az.Settings().SubscriptionID + "/resourceGroups/slow-rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/slow-identity"
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "PUT", PathPrefix: path}); n != 1 {
		t.Errorf("%d PUTs of the identity across the restart, want exactly 1", n)
	}
	if a := got.GetAnnotations(); a["serviceoperator.azure.com/poller-resume-token"] != "" || !strings.EqualFold(a["serviceoperator.azure.com/resource-id"], path) {
		t.Errorf("annotations after the operation: %v", a)
	}
}

// A running operation is polled again when ARM's Retry-After asks, not only each poll interval:
// with the longest wait set to an hour, an identity whose creation the cloud runs as a
// three-poll operation (Retry-After 20ms) still becomes Ready, and the cloud saw its polls.
func TestRunningOperationPolledAtARMsRetryAfter(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	if err := az.Faults().Set(faults.Config{Rules: []faults.Rule{{
		Method: "PUT", ResourceType: "Microsoft.ManagedIdentity/userAssignedIdentities", LRO: &faults.LRO{Polls: 3},
	}}}); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, c)
	startManagerWith(t, azureConfig(az), time.Hour, time.Hour, ns)
	id := obj(msiAPI, "UserAssignedIdentity", "polled-identity", map[string]any{"location": "westus2", "owner": map[string]any{"name": "polled-rg"}})
	create(t, c, ns, resourceGroup("polled-rg", nil), id)
	waitReady(t, c, id, time.Minute)
	polls := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "GET", PathPrefix: "/subscriptions/" + az.Settings().SubscriptionID + "/providers/Microsoft.Resources/operationStatuses/"})
	if polls == 0 {
		t.Error("no poll of the operation reached the cloud; the test proves nothing")
	}
}

// With throttling and injected faults (429s, 500s, slow and failing operations) everything
// converges.
func TestConvergesUnderFaults(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	if err := az.Faults().Set(faults.Config{Seed: 7, Rules: []faults.Rule{
		{Name: "throttle", ResourceType: faults.ServiceARM, Status: 429, RetryAfter: faults.Duration(time.Second), Rate: 0.2},
		{Name: "flaky", ResourceType: faults.ServiceARM, Method: "PUT", Status: 500, Rate: 0.2},
		{Name: "failing-lro", Method: "PUT", ResourceType: "Microsoft.ManagedIdentity/userAssignedIdentities", LRO: &faults.LRO{Polls: 2, Result: faults.ResultFailed}, Count: 1},
		{Name: "slow-lro", Method: "PUT", ResourceType: "Microsoft.KeyVault/vaults", LRO: &faults.LRO{Polls: 5}},
	}}); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	objs := samples(t)
	create(t, c, ns, objs...)
	for _, u := range objs {
		waitReady(t, c, u, 3*time.Minute)
	}
	// The faults stay on until every resource is Ready; the check below must not be throttled itself.
	if err := az.Faults().Set(faults.Config{}); err != nil {
		t.Fatal(err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(az.Settings().SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Get(t.Context(), "sample-rg", "sample-identity", nil); err != nil {
		t.Errorf("identity not in ARM after convergence: %v", err)
	}
	faulted := 0
	for _, e := range az.RequestLog().Entries(reqlog.Filter{Service: "arm"}) {
		if e.Fault != "" {
			faulted++
		}
	}
	if faulted == 0 {
		t.Error("no fault fired; the test proves nothing")
	}
	t.Logf("%d ARM requests were faulted", faulted)
}
