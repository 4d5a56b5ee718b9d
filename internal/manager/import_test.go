package manager_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/importer"
	"github.com/cerulean/cerulean/internal/manager"
)

// Import round trip: the samples (config/samples and the app's Azure services) go Ready through
// the manager; `cerulean import` of their two resource groups writes manifests with no secret
// in them; the objects are deleted with detach-on-delete and the imported files applied in
// their place: every resource is Ready, adopted (the same ARM id), and ARM sees no write at all;
// an adopted object is managed: deleting it deletes its resource.
func TestImportRoundTrip(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const syncPeriod = 2 * time.Second
	startManager(t, az, syncPeriod, ns)

	objs := append(samples(t), readObjects(t, "../../config/samples/app/01-azure.yaml")...)
	create(t, c, ns, objs...)
	var azureObjs []*unstructured.Unstructured
	ids := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Secret" {
			continue
		}
		got := waitReady(t, c, u, 3*time.Minute)
		azureObjs = append(azureObjs, got)
		id, _, _ := unstructured.NestedString(got.Object, "status", "id")
		ids[strings.ToLower(id)] = true
	}

	s := az.Settings()
	env := map[string]string{
		"AZURE_TENANT_ID": s.TenantID, "AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_CLIENT_ID": s.ClientID,
		"AZURE_CLIENT_SECRET": s.ClientSecret, "AZURE_AUTHORITY_HOST": s.AuthorityHost,
		"AZURE_RESOURCE_MANAGER_ENDPOINT": s.ResourceManagerEndpoint, "AZURE_RESOURCE_MANAGER_AUDIENCE": s.ResourceManagerAudience,
		"SSL_CERT_FILE": s.CAFile,
	}
	groups := []string{"/subscriptions/" + s.SubscriptionID + "/resourceGroups/sample-rg", "/subscriptions/" + s.SubscriptionID + "/resourceGroups/shop-rg"}
	dir := filepath.Join(t.TempDir(), "imported")
	log := az.RequestLog()
	before := log.Last()
	if err := importer.RunCLI(t.Context(), importer.CLIOptions{IDs: groups, Namespace: ns, Output: dir,
		Getenv: func(k string) string { return env[k] }}); err != nil {
		t.Fatal(err)
	}
	if n := armWrites(log, before); n != 0 {
		t.Errorf("the import sent %d ARM writes, want 0", n)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "flexibleserver-shop-pg.yaml")); err == nil {
		t.Logf("flexibleserver-shop-pg.yaml:\n%s", b)
	}

	// No secret in the output: not the administrator's password, not an account or cache key.
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no imported files: %v", err)
	}
	var all bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for what, secret := range importSecrets(t, az) {
		if bytes.Contains(all.Bytes(), []byte(secret)) {
			t.Errorf("the imported manifests hold the %s", what)
		}
	}

	// Every object is let go of, the Azure resources kept.
	for _, u := range azureObjs {
		cur := get(t, c, ns, u.GetName(), u)
		ann := cur.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[armresource.AnnotationReconcilePolicy] = armresource.PolicyDetachOnDelete
		cur.SetAnnotations(ann)
		if err := c.Update(t.Context(), cur); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range azureObjs {
		if err := c.Delete(t.Context(), u); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatal(err)
		}
	}
	for _, u := range azureObjs {
		waitGone(t, c, u, time.Minute)
	}
	if n := log.Count(reqlog.Filter{Service: "arm", Method: "DELETE"}); n != 0 {
		t.Fatalf("detach-on-delete sent %d DELETEs", n)
	}

	// The imported files, applied: each resource adopted, Ready, and not one ARM write.
	since := log.Last()
	var imported []*unstructured.Unstructured
	for _, f := range files {
		imported = append(imported, readObjects(t, f)...)
	}
	create(t, c, ns, imported...)
	adopted := map[string]bool{}
	for _, u := range imported {
		got := waitReady(t, c, u, 2*time.Minute)
		id, _, _ := unstructured.NestedString(got.Object, "status", "id")
		adopted[strings.ToLower(id)] = true
	}
	for id := range ids {
		if !adopted[id] {
			t.Errorf("%s was not imported and adopted", id)
		}
	}
	time.Sleep(2 * syncPeriod) // steady state: reads only
	if n := armWrites(log, since); n != 0 {
		for _, e := range log.Entries(reqlog.Filter{Service: "arm", Since: since}) {
			if e.Method != "GET" {
				t.Logf("%s %s", e.Method, e.Path)
			}
		}
		t.Errorf("adopting %d imported resources sent %d ARM writes, want 0", len(imported), n)
	}
	// Adopted is managed: deleting an imported object deletes its Azure resource.
	for _, u := range imported {
		if u.GetKind() != "StorageAccountsBlobServicesContainer" {
			continue
		}
		if err := c.Delete(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, u, time.Minute)
		deletes := 0
		for _, e := range log.Entries(reqlog.Filter{Service: "arm", Method: "DELETE", Since: since}) {
			if strings.HasSuffix(strings.ToLower(e.Path), "/containers/uploads") {
				deletes++
			}
		}
		if deletes != 1 {
			t.Errorf("deleting the imported container sent %d DELETEs of it, want 1", deletes)
		}
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	t.Logf("imported %d manifests (%s) from %d resources; adopted with 0 writes", len(imported), strings.Join(names, " "), len(ids))
}

// armWrites counts PUT, PATCH and DELETE requests to ARM since a point of the log.
func armWrites(log *reqlog.Log, since uint64) int {
	n := 0
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		n += log.Count(reqlog.Filter{Service: "arm", Method: m, Since: since})
	}
	return n
}

// importSecrets are the secrets the samples' resources hold, by name: none may reach a manifest.
func importSecrets(t *testing.T, az *cloud.Cloud) map[string]string {
	t.Helper()
	s := az.Settings()
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	out := map[string]string{"PostgreSQL administrator password": "Shop-admin-pw-9c41"}
	accounts, err := armstorage.NewAccountsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	for rg, account := range map[string]string{"sample-rg": "ceruleansample", "shop-rg": "shopstorage"} {
		keys, err := accounts.ListKeys(t.Context(), rg, account, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys.Keys {
			out[account+" key "+*k.KeyName] = *k.Value
		}
	}
	caches, err := armredis.NewClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := caches.ListKeys(t.Context(), "shop-rg", "shop-cache", nil)
	if err != nil {
		t.Fatal(err)
	}
	out["Redis primary key"], out["Redis secondary key"] = *keys.PrimaryKey, *keys.SecondaryKey
	return out
}

// Import of resources Cerulean has no typed kind for: a Service Bus namespace, its queue and
// the rule Azure creates with it become generic AzureResources that carry the applied hash and
// the finalizer as the typed kinds do, so that applying them adopts each with reads only, over
// two sync periods too. Only the group is named: the children are found through the provider.
func TestImportGenericRoundTrip(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const syncPeriod = 2 * time.Second
	startManagerOpts(t, manager.Options{Azure: azureConfig(az), SyncPeriod: syncPeriod, PollInterval: 100 * time.Millisecond,
		TargetNamespaces: []string{ns}, GenericResourceTypes: []string{"Microsoft.ServiceBus/*"}})
	s := az.Settings()
	group := cloudtest.CreateGroup(t, az, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az), "westus2", "imgen-rg")
	bus := group + "/providers/Microsoft.ServiceBus/namespaces/imgen" + strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	queue := bus + "/queues/jobs"
	if code, res := armCall(t, az, http.MethodPut, bus, "2021-11-01", map[string]any{
		"location": "westus2", "sku": map[string]any{"name": "Standard"}, "tags": map[string]any{"team": "a"}}); code >= 300 {
		t.Fatalf("create the namespace: %d %v", code, res)
	}
	eventually(t, time.Minute, "the namespace created", func() (bool, string) {
		_, res := armCall(t, az, http.MethodGet, bus, "2021-11-01")
		props, _ := res["properties"].(map[string]any)
		return props["provisioningState"] == "Succeeded", fmt.Sprint(props["provisioningState"])
	})
	if code, res := armCall(t, az, http.MethodPut, queue, "2021-11-01", map[string]any{
		"properties": map[string]any{"maxDeliveryCount": 5}}); code >= 300 {
		t.Fatalf("create the queue: %d %v", code, res)
	}

	env := map[string]string{
		"AZURE_TENANT_ID": s.TenantID, "AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_CLIENT_ID": s.ClientID,
		"AZURE_CLIENT_SECRET": s.ClientSecret, "AZURE_AUTHORITY_HOST": s.AuthorityHost,
		"AZURE_RESOURCE_MANAGER_ENDPOINT": s.ResourceManagerEndpoint, "AZURE_RESOURCE_MANAGER_AUDIENCE": s.ResourceManagerAudience,
		"SSL_CERT_FILE": s.CAFile,
	}
	dir := filepath.Join(t.TempDir(), "imported")
	if err := importer.RunCLI(t.Context(), importer.CLIOptions{IDs: []string{group}, Namespace: ns, Output: dir,
		Getenv: func(k string) string { return env[k] }}); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var imported []*unstructured.Unstructured
	for _, f := range files {
		imported = append(imported, readObjects(t, f)...)
	}
	generics := 0
	for _, u := range imported {
		if u.GetAPIVersion() != genericAPI {
			continue
		}
		generics++
		if u.GetAnnotations()[armresource.AnnotationAppliedHash] == "" || !slices.Contains(u.GetFinalizers(), armresource.Finalizer) {
			t.Errorf("generic %s: annotations %v, finalizers %v; want the applied hash and the finalizer", u.GetName(), u.GetAnnotations(), u.GetFinalizers())
		}
	}
	if generics != 3 || len(imported) != 4 {
		t.Fatalf("imported %d objects, %d of the generic kind; want the group, the namespace, its queue and its rule", len(imported), generics)
	}

	log := az.RequestLog()
	since := log.Last()
	create(t, c, ns, imported...)
	rule := bus + "/authorizationRules/RootManageSharedAccessKey"
	want := map[string]bool{strings.ToLower(group): true, strings.ToLower(bus): true, strings.ToLower(queue): true, strings.ToLower(rule): true}
	for _, u := range imported {
		got := waitReady(t, c, u, 2*time.Minute)
		id, _, _ := unstructured.NestedString(got.Object, "status", "id")
		if !want[strings.ToLower(id)] {
			t.Errorf("%s adopted %q, not one of the imported resources", u.GetName(), id)
		}
		delete(want, strings.ToLower(id))
	}
	time.Sleep(2 * syncPeriod) // steady state: reads only
	if n := armWrites(log, since); n != 0 {
		for _, e := range log.Entries(reqlog.Filter{Service: "arm", Since: since}) {
			if e.Method != "GET" {
				t.Logf("%s %s", e.Method, e.Path)
			}
		}
		t.Errorf("adopting the imported generic resources sent %d ARM writes over two sync periods, want 0", n)
	}
}
