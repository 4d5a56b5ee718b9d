package manager_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ceruleanv1alpha1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/manager"
)

// Issue 22's probes of namespace grants and schema limits (security_test.go has the
// controller's; the node agent's are in internal/podidentity/nodeagent/paths_test.go). Future changes keep
// these green.

// Point 5 of the issue (validation that ARM does later): the API server refuses each of
// Azure's limits at apply time.
func TestSchemaCarriesAzureLimits(t *testing.T) {
	c := kube(t)
	ns := namespace(t, c)
	tags := func(n int, name, value string) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("t%d", i)] = "v"
		}
		if name != "" {
			m[name] = value
		}
		return m
	}
	redisSKU := map[string]any{"name": "Basic", "family": "C", "capacity": 0}
	// Each call a new map: owned sets the owner in the map it is given.
	pgRule := func(azureName string) map[string]any {
		return withAzureName(map[string]any{"startIpAddress": "10.0.0.1", "endIpAddress": "10.0.0.2"}, azureName)
	}
	redisRule := func(azureName string) map[string]any {
		return withAzureName(map[string]any{"startIP": "10.0.0.1", "endIP": "10.0.0.2"}, azureName)
	}
	rg := func(name string, spec map[string]any) *unstructured.Unstructured {
		spec["location"] = "westus2"
		return obj(rgAPI, "ResourceGroup", name, spec)
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want string
	}{
		{rg("trailing-period", map[string]any{"azureName": "group."}), "spec.azureName"},
		{rg("long-name-"+strings.Repeat("a", 81), map[string]any{}), "at most 90 characters"},
		{rg("too-many-tags", map[string]any{"tags": tags(51, "", "")}), "spec.tags"},
		{rg("long-tag-name", map[string]any{"tags": tags(0, strings.Repeat("n", 513), "v")}), "tag names are 1 to 512"},
		{rg("long-tag-value", map[string]any{"tags": tags(0, "n", strings.Repeat("v", 257))}), "tag values are at most 256"},
		{obj("storage.azure.com/v1api20230101", "StorageAccount", "has-hyphens", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"},
			"kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"}}), "3 to 24 lowercase letters and digits"},
		{obj("storage.azure.com/v1api20230101", "StorageAccount", "longtags", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"},
			"kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"}, "tags": tags(0, strings.Repeat("n", 129), "v")}), "tag names are 1 to 128"},
		{obj("keyvault.azure.com/v1api20230701", "Vault", "double--hyphen", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"},
			"properties": map[string]any{"tenantId": "00000000-0000-0000-0000-000000000000", "sku": map[string]any{"family": "A", "name": "standard"}}}), "single hyphens"},
		{obj("keyvault.azure.com/v1api20230701", "Vault", "vault", map[string]any{"azureName": "v--x", "location": "westus2", "owner": map[string]any{"name": "rg"},
			"properties": map[string]any{"tenantId": "00000000-0000-0000-0000-000000000000", "sku": map[string]any{"family": "A", "name": "standard"}}}), "spec.azureName"},
		{obj(msiAPI, "UserAssignedIdentity", "dotted.name", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"}}), "3 to 128 letters"},
		{obj("dbforpostgresql.azure.com/v1api20240801", "FlexibleServer", "pg", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"}}), "server names are 3 to 63"},
		{obj("dbforpostgresql.azure.com/v1api20240801", "FlexibleServer", "pg-tags", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"},
			"tags": tags(0, "n", strings.Repeat("v", 257))}), "tag values are at most 256"},
		{obj("cache.azure.com/v1api20241101", "Redis", "double--hyphen", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"}, "sku": redisSKU}), "without consecutive hyphens"},
		{obj("cache.azure.com/v1api20230801", "Redis", "cache-"+strings.Repeat("a", 60), map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"}, "sku": redisSKU}), "cache names are 1 to 63"},
		{obj("cache.azure.com/v1api20241101", "Redis", "cache-tags", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"}, "sku": redisSKU,
			"tags": tags(51, "", "")}), "spec.tags"},
		// The children's names: each kind's Azure rule on metadata.name, and on spec.azureName.
		{owned(pgAPI, "FlexibleServersDatabase", "9db", "pg", nil), "database names are 1 to 63"},
		{owned(pgAPI, "FlexibleServersDatabase", "db", "pg", map[string]any{"azureName": "shop."}), "spec.azureName"},
		{owned(pgAPI, "FlexibleServersFirewallRule", "office.net", "pg", pgRule("")), "firewall rule names are 1 to 80"},
		{owned(pgAPI, "FlexibleServersFirewallRule", "rule", "pg", pgRule("pods.")), "spec.azureName"},
		{owned("cache.azure.com/v1api20241101", "RedisFirewallRule", "allow-office", "cache", redisRule("")), "cache firewall rule names are 1 to 64"},
		{owned("cache.azure.com/v1api20230801", "RedisFirewallRule", "rule.one", "cache", redisRule("")), "cache firewall rule names are 1 to 64"},
		{owned("cache.azure.com/v1api20241101", "RedisFirewallRule", "rule", "cache", redisRule("a"+strings.Repeat("b", 64))), "spec.azureName"},
		{owned(storageAPI, "StorageAccountsBlobServicesContainer", "double--hyphen", "blobs", nil), "container names are 3 to 63"},
		{owned("storage.azure.com/v20230101", "StorageAccountsBlobServicesContainer", "uploads", "blobs", map[string]any{"azureName": "up--loads"}), "spec.azureName"},
		{owned(storageAPI, "StorageAccountsQueueServicesQueue", "jq", "queues", nil), "queue names are 3 to 63"},
		{owned(storageAPI, "StorageAccountsQueueServicesQueue", "jobs", "queues", map[string]any{"azureName": "jobs-"}), "spec.azureName"},
		{owned(storageAPI, "StorageAccountsTableServicesTable", "event-log", "tables", nil), "table names are 3 to 63"},
		{owned("storage.azure.com/v20230101", "StorageAccountsTableServicesTable", "9events", "tables", nil), "table names are 3 to 63"},
	} {
		tc.obj.SetNamespace(ns)
		err := c.Create(t.Context(), tc.obj)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("create %s %s: got %v, want a rejection naming %q", tc.obj.GetKind(), tc.obj.GetName(), err, tc.want)
		}
	}
	// Names Azure takes pass: the rules refuse only what ARM would.
	for _, u := range []*unstructured.Unstructured{
		owned(pgAPI, "FlexibleServersDatabase", "appdb", "pg", nil),
		owned(pgAPI, "FlexibleServersDatabase", "app.db", "pg", map[string]any{"azureName": "_app-db"}),
		owned(pgAPI, "FlexibleServersFirewallRule", "shop-pg-pods", "pg", pgRule("")),
		owned(pgAPI, "FlexibleServersFirewallRule", "office.net", "pg", pgRule("Office_Net")),
		owned("cache.azure.com/v1api20241101", "RedisFirewallRule", "allowall", "cache", redisRule("")),
		owned("cache.azure.com/v1api20230801", "RedisFirewallRule", "allow-office", "cache", redisRule("allow_office")),
		owned(storageAPI, "StorageAccountsBlobServicesContainer", "uploads-2024", "blobs", nil),
		owned(storageAPI, "StorageAccountsQueueServicesQueue", "jobs", "queues", nil),
		owned(storageAPI, "StorageAccountsTableServicesTable", "events", "tables", nil),
		owned("storage.azure.com/v20230101", "StorageAccountsTableServicesTable", "event-log", "tables", map[string]any{"azureName": "EventLog"}),
	} {
		u.SetNamespace(ns)
		if err := c.Create(t.Context(), u); err != nil {
			t.Errorf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// withAzureName sets spec.azureName unless name is empty.
func withAzureName(spec map[string]any, name string) map[string]any {
	if name != "" {
		spec["azureName"] = name
	}
	return spec
}

// A grant applies at once: creating a NamespaceGrant, or adding a scope to one, runs the
// objects it unblocks without waiting for their retry. The retry here is ten minutes away, so
// only the manager's watch of the grants gets them Ready within the wait.
func TestNewGrantAppliesAtOnce(t *testing.T) {
	c := kube(t)
	ns := bareNamespace(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	sub := "/subscriptions/" + az.Settings().SubscriptionID
	startManagerOpts(t, manager.Options{Azure: azureConfig(az), SyncPeriod: 10 * time.Minute, PollInterval: 100 * time.Millisecond,
		TargetNamespaces: []string{ns}, RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](10*time.Minute, 10*time.Minute)})

	refused := func(u *unstructured.Unstructured) {
		t.Helper()
		eventually(t, time.Minute, u.GetName()+" refused for want of a grant", func() (bool, string) {
			st, _, reason, msg := ready(get(t, c, ns, u.GetName(), u))
			return st == "False" && reason == "NotGranted", st + " " + reason + ": " + msg
		})
	}
	first, second := resourceGroup("late-"+ns, nil), resourceGroup("later-"+ns, nil)
	create(t, c, ns, first, second)
	refused(first)
	refused(second)

	g := &ceruleanv1alpha1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "late-" + ns},
		Spec: ceruleanv1alpha1.NamespaceGrantSpec{Namespaces: []string{ns}, Scopes: []string{sub + "/resourceGroups/" + first.GetName()}}}
	if err := c.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
	waitReady(t, c, first, 2*time.Minute)
	if st, _, reason, _ := ready(get(t, c, ns, second.GetName(), second)); st != "False" || reason != "NotGranted" {
		t.Fatalf("%s, not granted yet: %s %s", second.GetName(), st, reason)
	}

	// A changed grant too.
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(g), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Scopes = append(g.Spec.Scopes, sub+"/resourceGroups/"+second.GetName())
	if err := c.Update(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, second, 2*time.Minute)
}

// bareNamespace is a namespace no grant lists: a tenant the admin has not given anything.
func bareNamespace(t *testing.T) string {
	t.Helper()
	c := kube(t)
	name := fmt.Sprintf("tenant-%d", time.Now().UnixNano()%1000000)
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// Issue 22 point 3: from a namespace nothing was granted, a RoleAssignment on an arbitrary
// scope and a resource group are refused before any ARM write, with a message naming the grant;
// once an admin grants the scope, the same objects go Ready.
func TestScopesAreGrantedToNamespaces(t *testing.T) {
	c := kube(t)
	ns := bareNamespace(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	sub := "/subscriptions/" + az.Settings().SubscriptionID
	victim := sub + "/resourceGroups/victim-" + ns
	startManager(t, az, time.Minute, ns)

	rg := resourceGroup("tenant-rg", nil)
	ra := obj("authorization.azure.com/v1api20220401", "RoleAssignment", "owner-of-victim", map[string]any{
		"owner":                   map[string]any{"armId": victim},
		"principalId":             "00000000-0000-0000-0000-000000000001",
		"roleDefinitionReference": map[string]any{"wellKnownName": "Owner"},
	})
	since := az.RequestLog().Last()
	create(t, c, ns, rg, ra)
	for _, u := range []*unstructured.Unstructured{rg, ra} {
		eventually(t, time.Minute, u.GetName()+" refused for want of a grant", func() (bool, string) {
			st, sev, reason, msg := ready(get(t, c, ns, u.GetName(), u))
			return st == "False" && sev == "Error" && reason == "NotGranted" && strings.Contains(msg, "NamespaceGrant") && strings.Contains(msg, ns),
				st + " " + sev + " " + reason + ": " + msg
		})
	}
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); n != 0 {
		t.Fatalf("%d ARM PUTs from an ungranted namespace", n)
	}

	g := &ceruleanv1alpha1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "grant-" + ns},
		Spec: ceruleanv1alpha1.NamespaceGrantSpec{Namespaces: []string{ns}, Scopes: []string{sub + "/resourceGroups/tenant-rg"}}}
	if err := c.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
	waitReady(t, c, rg, 2*time.Minute)
	// The victim's scope is still not granted.
	if st, _, reason, _ := ready(get(t, c, ns, ra.GetName(), ra)); st != "False" || reason != "NotGranted" {
		t.Fatalf("role assignment on an ungranted scope: %s %s", st, reason)
	}
}

// A tenant cannot delete what its namespace was not granted: a ResourceGroup object named after
// another team's group, carrying the manager's finalizer and a resource-id written by hand, is
// refused while it lives and released without a DELETE when deleted. The victim survives.
func TestUngrantedDeleteSendsNothing(t *testing.T) {
	c := kube(t)
	ns := bareNamespace(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	victim := cloudtest.CreateGroup(t, az, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az), "westus2", "team-b-"+ns)
	startManager(t, az, time.Minute, ns)
	since := az.RequestLog().Last()

	rg := resourceGroup("takeover", map[string]string{armresource.AnnotationResourceID: victim})
	rg.SetFinalizers([]string{armresource.Finalizer})
	if err := unstructured.SetNestedField(rg.Object, "team-b-"+ns, "spec", "azureName"); err != nil {
		t.Fatal(err)
	}
	create(t, c, ns, rg)
	eventually(t, time.Minute, "refused for want of a grant", func() (bool, string) {
		st, _, reason, msg := ready(get(t, c, ns, rg.GetName(), rg))
		return st == "False" && reason == "NotGranted", st + " " + reason + ": " + msg
	})
	if err := c.Delete(t.Context(), rg); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rg, time.Minute)
	if !groupExists(t, az, "team-b-"+ns) {
		t.Fatal("the other team's group was deleted")
	}
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "DELETE", Since: since}); n != 0 {
		t.Errorf("%d DELETEs reached ARM from an ungranted namespace", n)
	}
}
