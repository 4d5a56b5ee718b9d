package manager_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/manager"
)

const genericAPI = "cerulean.dev/v1alpha1"

// generic is an AzureResource of typ at version, owned by the object {group, kind, name}
// (an "/subscriptions/..." owner is an armId), with the ARM members of body.
func generic(name, typ, version string, owner []string, body map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"type": typ, "apiVersion": version}
	if len(owner) == 1 {
		spec["owner"] = map[string]any{"armId": owner[0]}
	} else {
		spec["owner"] = map[string]any{"group": owner[0], "kind": owner[1], "name": owner[2]}
	}
	for k, v := range body {
		spec[k] = v
	}
	return obj(genericAPI, "AzureResource", name, spec)
}

// armCall sends one request with the cloud's owner credential through the SDK's pipeline and
// decodes the answer; 0 status means the call itself failed.
func armCall(t *testing.T, az *cloud.Cloud, method, path, version string, body ...map[string]any) (int, map[string]any) {
	t.Helper()
	c, err := arm.NewClient("test", "v1.0.0", cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runtime.NewRequest(t.Context(), method, strings.TrimSuffix(az.Settings().ResourceManagerEndpoint, "/")+path)
	if err != nil {
		t.Fatal(err)
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", version)
	req.Raw().URL.RawQuery = q.Encode()
	if len(body) > 0 {
		if err := runtime.MarshalAsJSON(req, body[0]); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Pipeline().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// The generic kind with the types issue 25 names: a Service Bus namespace and a queue under it
// (owner by name, another AzureResource), an Event Hubs namespace, a Cosmos DB account and a
// virtual network, each Ready with ARM's answer as status; exports from a POST action's answer
// (listKeys) into Secrets and from the resource into a ConfigMap; no PUT in steady state; a
// detach-on-delete child keeps its Azure resource, a deleted account is deleted in Azure.
func TestGenericKindReconcilesAnyType(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const sync = 2 * time.Second
	startManagerOpts(t, manager.Options{Azure: azureConfig(az), SyncPeriod: sync, PollInterval: 100 * time.Millisecond,
		TargetNamespaces: []string{ns}, GenericResourceTypes: []string{
			"Microsoft.ServiceBus/*", "microsoft.eventhub/namespaces", "Microsoft.DocumentDB/databaseAccounts", "Microsoft.Network/virtualNetworks",
		}})
	log := az.RequestLog()
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	rgOwner := []string{"resources.azure.com", "ResourceGroup", "generic-rg"}

	bus := generic("bus", "Microsoft.ServiceBus/namespaces", "2021-11-01", rgOwner, map[string]any{
		"azureName": "bus" + suffix, "location": "westus2", "sku": map[string]any{"name": "Standard"}, "tags": map[string]any{"team": "a"},
		"operatorSpec": map[string]any{
			"action": "authorizationRules/RootManageSharedAccessKey/listKeys",
			"secretExpressions": []any{
				map[string]any{"name": "bus-conn", "key": "connectionString", "value": "secret.primaryConnectionString"},
				map[string]any{"name": "bus-conn", "key": "keyName", "value": "secret.keyName"},
			},
			"configMapExpressions": []any{map[string]any{"name": "bus-info", "key": "endpoint", "value": "self.status.properties.serviceBusEndpoint"}},
		},
	})
	queue := generic("jobs", "Microsoft.ServiceBus/namespaces/queues", "2021-11-01", []string{"cerulean.dev", "AzureResource", "bus"},
		map[string]any{"properties": map[string]any{"maxDeliveryCount": int64(5)}})
	queue.SetAnnotations(map[string]string{"serviceoperator.azure.com/reconcile-policy": "detach-on-delete"})
	hub := generic("hub", "Microsoft.EventHub/namespaces", "2024-01-01", rgOwner, map[string]any{
		"azureName": "hub" + suffix, "location": "westus2", "sku": map[string]any{"name": "Standard", "capacity": int64(1)}})
	cosmos := generic("cosmos", "Microsoft.DocumentDB/databaseAccounts", "2024-11-15", rgOwner, map[string]any{
		"azureName": "cosmos" + suffix, "location": "westus2", "kind": "GlobalDocumentDB",
		"properties": map[string]any{"databaseAccountOfferType": "Standard", "locations": []any{map[string]any{"locationName": "westus2", "failoverPriority": int64(0)}}},
		"operatorSpec": map[string]any{"action": "listKeys", "secretExpressions": []any{
			map[string]any{"name": "cosmos", "value": `{"key": secret.primaryMasterKey, "endpoint": self.status.properties.documentEndpoint}`},
		}},
	})
	vnet := generic("vnet", "Microsoft.Network/virtualNetworks", "2024-05-01", rgOwner, map[string]any{
		"location": "westus2", "properties": map[string]any{"addressSpace": map[string]any{"addressPrefixes": []any{"10.1.0.0/16"}}}})
	all := []*unstructured.Unstructured{queue, bus, hub, cosmos, vnet} // the queue first: it waits for its namespace
	create(t, c, ns, all...)
	eventually(t, time.Minute, "the queue waits for its namespace", func() (bool, string) {
		st, _, reason, msg := ready(get(t, c, ns, "jobs", queue))
		return st == "False" && reason == "WaitingForOwner", st + " " + reason + ": " + msg
	})
	rg := resourceGroup("generic-rg", nil)
	create(t, c, ns, rg)
	sub := "/subscriptions/" + az.Settings().SubscriptionID + "/resourceGroups/generic-rg/providers/"
	wantIDs := map[string]string{
		"bus": sub + "Microsoft.ServiceBus/namespaces/bus" + suffix, "jobs": sub + "Microsoft.ServiceBus/namespaces/bus" + suffix + "/queues/jobs",
		"hub": sub + "Microsoft.EventHub/namespaces/hub" + suffix, "cosmos": sub + "Microsoft.DocumentDB/databaseAccounts/cosmos" + suffix,
		"vnet": sub + "Microsoft.Network/virtualNetworks/vnet",
	}
	for _, u := range all {
		got := waitReady(t, c, u, 2*time.Minute)
		id, _, _ := unstructured.NestedString(got.Object, "status", "id")
		state, _, _ := unstructured.NestedString(got.Object, "status", "properties", "provisioningState")
		if !strings.EqualFold(id, wantIDs[u.GetName()]) || state != "Succeeded" {
			t.Errorf("%s: status.id %q (want %s), provisioningState %q", u.GetName(), id, wantIDs[u.GetName()], state)
		}
	}
	// What ARM holds is the spec's body.
	if code, res := armCall(t, az, http.MethodGet, wantIDs["jobs"], "2021-11-01"); code != http.StatusOK ||
		res["properties"].(map[string]any)["maxDeliveryCount"] != float64(5) {
		t.Errorf("queue in ARM: %d %v", code, res)
	}

	// Exports: the action's answer as secret, the resource as self.
	_, keys := armCall(t, az, http.MethodPost, wantIDs["bus"]+"/authorizationRules/RootManageSharedAccessKey/listKeys", "2021-11-01")
	var s corev1.Secret
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "bus-conn"}, &s); err != nil {
		t.Fatal(err)
	}
	if cs := string(s.Data["connectionString"]); cs == "" || cs != keys["primaryConnectionString"] || string(s.Data["keyName"]) != "RootManageSharedAccessKey" {
		t.Errorf("bus-conn holds %d bytes of connection string and keyName %q; ARM's listKeys differs", len(cs), s.Data["keyName"])
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "bus-info"}, &cm); err != nil || !strings.Contains(cm.Data["endpoint"], "bus"+suffix) {
		t.Errorf("bus-info: %v %v", cm.Data, err)
	}
	_, cosmosKeys := armCall(t, az, http.MethodPost, wantIDs["cosmos"]+"/listKeys", "2024-11-15")
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cosmos"}, &s); err != nil {
		t.Fatal(err)
	}
	if k := string(s.Data["key"]); k == "" || k != cosmosKeys["primaryMasterKey"] || !strings.HasPrefix(string(s.Data["endpoint"]), "https://") {
		t.Errorf("cosmos secret: key of %d bytes (ARM's differs: %v), endpoint %q", len(k), k != cosmosKeys["primaryMasterKey"], s.Data["endpoint"])
	}

	// Steady state: reads only.
	since := log.Last()
	time.Sleep(3 * sync)
	if puts := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); puts != 0 {
		t.Errorf("steady state sent %d PUTs over three sync periods, want 0", puts)
	}
	if gets := log.Count(reqlog.Filter{Service: "arm", Method: "GET", Since: since}); gets < len(all) {
		t.Errorf("steady state sent %d GETs, want at least one per resource (%d)", gets, len(all))
	}

	// Drift: a value the spec sets, changed in Azure, is put back at the next sync.
	if code, _ := armCall(t, az, http.MethodPut, wantIDs["jobs"], "2021-11-01",
		map[string]any{"properties": map[string]any{"maxDeliveryCount": 9}}); code != http.StatusOK {
		t.Fatalf("drift the queue: %d", code)
	}
	eventually(t, time.Minute, "the queue's maxDeliveryCount put back", func() (bool, string) {
		_, res := armCall(t, az, http.MethodGet, wantIDs["jobs"], "2021-11-01")
		props, _ := res["properties"].(map[string]any)
		return props["maxDeliveryCount"] == float64(5), fmt.Sprint(props)
	})

	// Deletion: the detach-on-delete queue stays in Azure; the account goes.
	deleteSince := log.Last()
	for _, u := range []*unstructured.Unstructured{queue, cosmos} {
		if err := c.Delete(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, u, 2*time.Minute)
	}
	for _, e := range log.Entries(reqlog.Filter{Service: "arm", Method: "DELETE", Since: deleteSince}) {
		if strings.Contains(strings.ToLower(e.Path), "/queues/jobs") {
			t.Errorf("the detach-on-delete queue was deleted in Azure: %s", e.Path)
		}
	}
	if code, _ := armCall(t, az, http.MethodGet, wantIDs["jobs"], "2021-11-01"); code != http.StatusOK {
		t.Errorf("detached queue: GET %d, want 200", code)
	}
	if code, _ := armCall(t, az, http.MethodGet, wantIDs["cosmos"], "2024-11-15"); code != http.StatusNotFound {
		t.Errorf("deleted account: GET %d, want 404", code)
	}
}

// Refusals of the generic kind: a type the allow-list lacks never reaches ARM (Ready=False,
// TypeNotAllowed, an Event), a child under an owner of another type is refused before ARM,
// ARM's own errors (an unknown type, an api-version it does not serve) reach the condition,
// a malformed api-version and a body member that is not an object are refused by the schema,
// and an expression that does not compile creates nothing.
func TestGenericKindRefusals(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManagerOpts(t, manager.Options{Azure: azureConfig(az), SyncPeriod: time.Minute, PollInterval: 100 * time.Millisecond,
		TargetNamespaces: []string{ns}, GenericResourceTypes: []string{"Microsoft.ServiceBus/namespaces", "Microsoft.ServiceBus/widgets", "Microsoft.EventHub/namespaces/queues"}})
	log := az.RequestLog()
	rg := resourceGroup("refusals-rg", nil)
	create(t, c, ns, rg)
	waitReady(t, c, rg, time.Minute)
	rgOwner := []string{"resources.azure.com", "ResourceGroup", rg.GetName()}
	since := log.Last()

	denied := generic("cosmos", "Microsoft.DocumentDB/databaseAccounts", "2024-11-15", rgOwner, map[string]any{"location": "westus2"})
	bus := generic("bus", "Microsoft.ServiceBus/namespaces", "2021-11-01", rgOwner, map[string]any{"azureName": "refusals-bus-" + ns[len(ns)-5:], "location": "westus2"})
	// An allowed child type whose owner is of another type: the id would be a Service Bus queue.
	misowned := generic("queue", "Microsoft.EventHub/namespaces/queues", "2021-11-01", []string{"cerulean.dev", "AzureResource", "bus"}, nil)
	unknown := generic("widget", "Microsoft.ServiceBus/widgets", "2021-11-01", rgOwner, map[string]any{"location": "westus2"})
	future := generic("future", "Microsoft.ServiceBus/namespaces", "2099-01-01", rgOwner, map[string]any{"location": "westus2"})
	badExpr := generic("bad-expression", "Microsoft.ServiceBus/namespaces", "2021-11-01", rgOwner, map[string]any{"location": "westus2",
		"operatorSpec": map[string]any{"secretExpressions": []any{map[string]any{"name": "out", "key": "k", "value": "secret.primaryKey +"}}}})
	create(t, c, ns, denied, bus, misowned, unknown, future, badExpr)

	expect := func(u *unstructured.Unstructured, severity, reason string, says ...string) {
		t.Helper()
		eventually(t, time.Minute, u.GetName()+" refused", func() (bool, string) {
			st, sev, r, msg := ready(get(t, c, ns, u.GetName(), u))
			ok := st == "False" && sev == severity && r == reason
			for _, s := range says {
				ok = ok && strings.Contains(msg, s)
			}
			return ok, st + " " + sev + " " + r + ": " + msg
		})
	}
	expect(denied, "Error", "TypeNotAllowed", "Microsoft.DocumentDB/databaseAccounts", "--generic-resource-types")
	eventually(t, 30*time.Second, "a TypeNotAllowed Event", func() (bool, string) { return eventSeen(t, c, ns, denied.GetName(), "Warning/TypeNotAllowed") })
	waitReady(t, c, bus, time.Minute)
	expect(misowned, "Error", "ReconciliationFailedPermanently", "Microsoft.ServiceBus/namespaces/queues", "not Microsoft.EventHub/namespaces/queues")
	expect(unknown, "Warning", "ReconciliationFailure", "InvalidResourceType")
	expect(future, "Error", "ReconciliationFailedPermanently", "NoRegisteredProviderFound", "2099-01-01")
	expect(badExpr, "Error", "ReconciliationFailedPermanently", "Syntax error")
	for _, e := range log.Entries(reqlog.Filter{Service: "arm", Since: since}) {
		p := strings.ToLower(e.Path)
		if strings.Contains(p, "documentdb") || strings.Contains(p, "/queues/") || strings.Contains(p, "bad-expression") {
			t.Errorf("a refused resource reached ARM: %s %s", e.Method, e.Path)
		}
	}

	// The schema: an api-version that is no date, a body member that is not an object.
	for what, u := range map[string]*unstructured.Unstructured{
		"spec.apiVersion": generic("latest", "Microsoft.ServiceBus/namespaces", "latest", rgOwner, nil),
		"spec.properties": generic("string-body", "Microsoft.ServiceBus/namespaces", "2021-11-01", rgOwner, map[string]any{"properties": "Standard"}),
		"spec.type":       generic("no-type", "ServiceBus", "2021-11-01", rgOwner, nil),
	} {
		u.SetNamespace(ns)
		if err := c.Create(t.Context(), u); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: create gave %v, want a refusal naming %s", u.GetName(), err, what)
		}
	}

	// A refused object is deleted at once, and nothing in Azure with it.
	deleteSince := log.Last()
	for _, u := range []*unstructured.Unstructured{denied, misowned} {
		if err := c.Delete(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, u, time.Minute)
	}
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "DELETE", Since: deleteSince}); n != 0 {
		t.Errorf("deleting refused objects sent %d DELETEs", n)
	}
}
