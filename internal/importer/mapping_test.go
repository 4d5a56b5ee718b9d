package importer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"sigs.k8s.io/yaml"

	"github.com/cerulean/cerulean/internal/controller/armresource"
)

const (
	sub = "/subscriptions/00000000-0000-0000-0000-000000000001"
	rg  = sub + "/resourceGroups/Team-RG"
)

// imported runs the mapping over ARM bodies (id → JSON), as Import does after reading them.
func imported(t *testing.T, o Options, bodies ...[2]string) map[string]Manifest {
	t.Helper()
	all := map[string]*resource{}
	var order []*resource
	for _, b := range bodies {
		id, err := arm.ParseResourceID(b[0])
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(b[1]), &body); err != nil {
			t.Fatalf("%s: %v", b[0], err)
		}
		res := &resource{id: id, armType: id.ResourceType.String(), kind: kindOf(id.ResourceType.String()), body: body, apiVersion: "2099-01-01"}
		all[strings.ToLower(id.String())] = res
		order = append(order, res)
	}
	nameResources(order, all)
	out := map[string]Manifest{}
	for _, res := range order {
		m, err := manifestOf(res, all, o)
		if err != nil {
			t.Fatalf("%s: %v", res.id, err)
		}
		key := res.id.Name
		if key == "default" { // a storage account's three services
			key = res.id.ResourceType.Types[len(res.id.ResourceType.Types)-1] + "/default"
		}
		out[key] = m
	}
	return out
}

func specOfManifest(m Manifest) map[string]any {
	s, _ := m.Object["spec"].(map[string]any)
	return s
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each typed kind: the spec is what the reconciler sends back (flattened kinds' properties at
// the top, a Redis's sku out of properties), read-only members gone, owners by name, Azure
// names kept where the Kubernetes name differs.
func TestTypedKindMapping(t *testing.T) {
	ua := rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/App_ID"
	pg := rg + "/providers/Microsoft.DBforPostgreSQL/flexibleServers/shop-pg"
	redis := rg + "/providers/Microsoft.Cache/redis/shop-cache"
	st := rg + "/providers/Microsoft.Storage/storageAccounts/shopstorage"
	aks := rg + "/providers/Microsoft.ContainerService/managedClusters/aks1"
	ra := rg + "/providers/Microsoft.Authorization/roleAssignments/6f0b5e3a-1d43-4a53-8f4b-0a2f4d5f8e11"
	reader := sub + "/providers/Microsoft.Authorization/roleDefinitions/acdd72a7-3385-48ef-bd42-f606fba81ae7"
	ms := imported(t, Options{Namespace: "team"},
		[2]string{rg, `{"id":"` + rg + `","name":"Team-RG","type":"Microsoft.Resources/resourceGroups","location":"westus2","tags":{"app":"shop"},"properties":{"provisioningState":"Succeeded"}}`},
		[2]string{ua, `{"id":"` + ua + `","name":"App_ID","location":"westus2","tags":{},"properties":{"clientId":"c","principalId":"p","tenantId":"t"}}`},
		[2]string{ua + "/federatedIdentityCredentials/github", `{"name":"github","properties":{"issuer":"https://issuer","subject":"repo:x","audiences":["api://AzureADTokenExchange"]}}`},
		[2]string{rg + "/providers/Microsoft.KeyVault/vaults/shop-kv", `{"location":"westus2","properties":{"tenantId":"t","sku":{"family":"A","name":"standard"},"vaultUri":"https://shop-kv.vault.azure.net/","enableRbacAuthorization":true,"provisioningState":"Succeeded"},"systemData":{"createdBy":"x"}}`},
		[2]string{ra, `{"properties":{"roleDefinitionId":"` + reader + `","principalId":"p","principalType":"ServicePrincipal","scope":"` + rg + `","createdOn":"2026-01-01T00:00:00Z"}}`},
		[2]string{st, `{"location":"westus2","kind":"StorageV2","sku":{"name":"Standard_LRS","tier":"Standard"},"properties":{"primaryEndpoints":{"blob":"https://x"},"creationTime":"t","minimumTlsVersion":"TLS1_2","accessTier":"Hot","provisioningState":"Succeeded"}}`},
		[2]string{st + "/blobServices/default", `{"sku":{"name":"Standard_LRS"},"properties":{"deleteRetentionPolicy":{"enabled":false}}}`},
		[2]string{st + "/blobServices/default/containers/uploads", `{"properties":{"publicAccess":"None","leaseState":"Available","lastModifiedTime":"t","hasLegalHold":false}}`},
		[2]string{st + "/queueServices/default", `{"sku":{"name":"Standard_LRS"},"properties":{"cors":{"corsRules":[]}}}`},
		[2]string{st + "/queueServices/default/queues/jobs", `{"properties":{"metadata":{"team":"a"},"approximateMessageCount":3}}`},
		[2]string{st + "/tableServices/default", `{"properties":{}}`},
		[2]string{st + "/tableServices/default/tables/events", `{"properties":{"tableName":"events"}}`},
		[2]string{aks, `{"location":"westus2","identity":{"type":"SystemAssigned","principalId":"p","tenantId":"t"},"properties":{"dnsPrefix":"aks1","fqdn":"aks1.hcp","oidcIssuerProfile":{"enabled":true,"issuerURL":"https://oidc"},"kubernetesVersion":"1.30"}}`},
		[2]string{pg, `{"location":"westus2","sku":{"name":"Standard_B1ms","tier":"Burstable"},"properties":{"version":"16","administratorLogin":"shopadmin","storage":{"storageSizeGB":32},"fullyQualifiedDomainName":"shop-pg.postgres.database.azure.com","state":"Ready"}}`},
		[2]string{pg + "/databases/shop", `{"properties":{"charset":"UTF8","collation":"en_US.utf8"}}`},
		[2]string{pg + "/configurations/work_mem", `{"properties":{"value":"8192","source":"user-override","defaultValue":"4096","dataType":"Integer","isReadOnly":false}}`},
		[2]string{redis, `{"location":"westus2","properties":{"sku":{"name":"Basic","family":"C","capacity":0},"enableNonSslPort":false,"minimumTlsVersion":"1.2","hostName":"shop-cache.redis.cache.windows.net","port":6379,"sslPort":6380,"accessKeys":{"primaryKey":"K"}}}`},
		[2]string{redis + "/firewallRules/pods", `{"properties":{"startIP":"10.0.0.0","endIP":"10.0.0.255"}}`},
	)
	want := map[string]struct{ apiVersion, kind, name, spec string }{
		"Team-RG": {"resources.azure.com/v1api20200601", "ResourceGroup", "team-rg",
			`{"azureName":"Team-RG","location":"westus2","tags":{"app":"shop"}}`},
		"App_ID": {"managedidentity.azure.com/v1api20230131", "UserAssignedIdentity", "app-id",
			`{"azureName":"App_ID","location":"westus2","owner":{"name":"team-rg"}}`},
		"github": {"managedidentity.azure.com/v1api20230131", "FederatedIdentityCredential", "app-id-github",
			`{"audiences":["api://AzureADTokenExchange"],"azureName":"github","issuer":"https://issuer","owner":{"name":"app-id"},"subject":"repo:x"}`},
		"shop-kv": {"keyvault.azure.com/v1api20230701", "Vault", "shop-kv",
			`{"location":"westus2","owner":{"name":"team-rg"},"properties":{"enableRbacAuthorization":true,"sku":{"family":"A","name":"standard"},"tenantId":"t"}}`},
		"6f0b5e3a-1d43-4a53-8f4b-0a2f4d5f8e11": {"authorization.azure.com/v1api20220401", "RoleAssignment", "6f0b5e3a-1d43-4a53-8f4b-0a2f4d5f8e11",
			`{"azureName":"6f0b5e3a-1d43-4a53-8f4b-0a2f4d5f8e11","owner":{"group":"resources.azure.com","kind":"ResourceGroup","name":"team-rg"},"principalId":"p","principalType":"ServicePrincipal","roleDefinitionReference":{"armId":"` + reader + `"}}`},
		"shopstorage": {"storage.azure.com/v20250601", "StorageAccount", "shopstorage",
			`{"accessTier":"Hot","kind":"StorageV2","location":"westus2","minimumTlsVersion":"TLS1_2","owner":{"name":"team-rg"},"sku":{"name":"Standard_LRS","tier":"Standard"}}`},
		"blobServices/default": {"storage.azure.com/v20250601", "StorageAccountsBlobService", "shopstorage-default",
			`{"azureName":"default","deleteRetentionPolicy":{"enabled":false},"owner":{"name":"shopstorage"}}`},
		"queueServices/default": {"storage.azure.com/v20250601", "StorageAccountsQueueService", "shopstorage-default",
			`{"azureName":"default","cors":{"corsRules":[]},"owner":{"name":"shopstorage"}}`},
		"tableServices/default": {"storage.azure.com/v20250601", "StorageAccountsTableService", "shopstorage-default",
			`{"azureName":"default","owner":{"name":"shopstorage"}}`},
		"uploads": {"storage.azure.com/v20250601", "StorageAccountsBlobServicesContainer", "shopstorage-default-uploads",
			`{"azureName":"uploads","owner":{"name":"shopstorage-default"},"publicAccess":"None"}`},
		"jobs": {"storage.azure.com/v20250601", "StorageAccountsQueueServicesQueue", "shopstorage-default-jobs",
			`{"azureName":"jobs","metadata":{"team":"a"},"owner":{"name":"shopstorage-default"}}`},
		"events": {"storage.azure.com/v20250601", "StorageAccountsTableServicesTable", "shopstorage-default-events",
			`{"azureName":"events","owner":{"name":"shopstorage-default"}}`},
		"aks1": {"containerservice.azure.com/v1api20240901", "ManagedCluster", "aks1",
			`{"dnsPrefix":"aks1","identity":{"type":"SystemAssigned"},"kubernetesVersion":"1.30","location":"westus2","oidcIssuerProfile":{"enabled":true},"owner":{"name":"team-rg"}}`},
		"shop-pg": {"dbforpostgresql.azure.com/v1api20250801", "FlexibleServer", "shop-pg",
			`{"administratorLogin":"shopadmin","location":"westus2","owner":{"name":"team-rg"},"sku":{"name":"Standard_B1ms","tier":"Burstable"},"storage":{"storageSizeGB":32},"version":"16"}`},
		"shop": {"dbforpostgresql.azure.com/v1api20250801", "FlexibleServersDatabase", "shop-pg-shop",
			`{"azureName":"shop","charset":"UTF8","collation":"en_US.utf8","owner":{"name":"shop-pg"}}`},
		"work_mem": {"dbforpostgresql.azure.com/v1api20250801", "FlexibleServersConfiguration", "shop-pg-work-mem",
			`{"azureName":"work_mem","owner":{"name":"shop-pg"},"source":"user-override","value":"8192"}`},
		"shop-cache": {"cache.azure.com/v1api20241101", "Redis", "shop-cache",
			`{"enableNonSslPort":false,"location":"westus2","minimumTlsVersion":"1.2","owner":{"name":"team-rg"},"sku":{"capacity":0,"family":"C","name":"Basic"}}`},
		"pods": {"cache.azure.com/v1api20241101", "RedisFirewallRule", "shop-cache-pods",
			`{"azureName":"pods","endIP":"10.0.0.255","owner":{"name":"shop-cache"},"startIP":"10.0.0.0"}`},
	}
	if len(ms) != len(want) {
		t.Fatalf("%d manifests, want %d", len(ms), len(want))
	}
	for azName, w := range want {
		m := ms[azName]
		meta, _ := m.Object["metadata"].(map[string]any)
		if m.Object["apiVersion"] != w.apiVersion || m.Object["kind"] != w.kind || meta["name"] != w.name || meta["namespace"] != "team" {
			t.Errorf("%s: %v %v %v in %v, want %s %s %s in team", azName, m.Object["apiVersion"], m.Object["kind"], meta["name"], meta["namespace"], w.apiVersion, w.kind, w.name)
		}
		if got := jsonOf(t, specOfManifest(m)); got != w.spec {
			t.Errorf("%s spec:\n got %s\nwant %s", azName, got, w.spec)
		}
		// The applied-hash is the reconciler's own hash of the body this spec makes, so the
		// manager reads and compares instead of writing; the finalizer makes a later delete work.
		ann, _ := meta["annotations"].(map[string]any)
		kind := kindOf(armTypeOf(t, azName, ms))
		hash, ok := kind.BodyHash(specOfManifest(m))
		if !ok || ann[armresource.AnnotationAppliedHash] != hash {
			t.Errorf("%s: applied-hash %v, want %s (%t)", azName, ann[armresource.AnnotationAppliedHash], hash, ok)
		}
		if !reflect.DeepEqual(meta["finalizers"], []any{armresource.Finalizer}) {
			t.Errorf("%s: finalizers %v", azName, meta["finalizers"])
		}
		if _, ok := ann[armresource.AnnotationReconcilePolicy]; ok {
			t.Errorf("%s: a reconcile policy was written though none was asked for", azName)
		}
	}
	// ARM's values that must not reach a spec: computed, or keys.
	out := jsonOf(t, ms)
	for _, s := range []string{`"K"`, "vaultUri", "provisioningState", "fullyQualifiedDomainName", "issuerURL", "principalId\":\"p\",\"tenantId", "systemData", "leaseState"} {
		if strings.Contains(out, s) {
			t.Errorf("the manifests hold %s", s)
		}
	}
}

// armTypeOf finds the ARM type a manifest of the test was made from, by its Azure name.
func armTypeOf(t *testing.T, azName string, ms map[string]Manifest) string {
	t.Helper()
	gvk := ms[azName].Object["apiVersion"].(string) + "/" + ms[azName].Object["kind"].(string)
	for _, k := range armresource.Kinds() {
		if k.GVK.GroupVersion().String()+"/"+k.GVK.Kind == gvk {
			return k.ARMType
		}
	}
	t.Fatalf("no kind %s", gvk)
	return ""
}

// A server's administrator password: never in the output. By default the field is left out
// (the password stays as it is in Azure) and a comment says how to manage it; with
// SecretReferences it reads a Secret the user creates, and then no applied-hash is stamped:
// the first reconcile sets the password from the Secret.
func TestSecretInputs(t *testing.T) {
	pg := rg + "/providers/Microsoft.DBforPostgreSQL/flexibleServers/shop-pg"
	body := `{"location":"westus2","properties":{"administratorLogin":"shopadmin","administratorLoginPassword":"Leaked-pw-1","version":"16"}}`
	for _, refs := range []bool{false, true} {
		m := imported(t, Options{SecretReferences: refs, ReconcilePolicy: "skip"}, [2]string{rg, `{"location":"westus2"}`}, [2]string{pg, body})["shop-pg"]
		b, err := m.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "Leaked-pw-1") {
			t.Fatalf("secret references %t: the password is in the manifest:\n%s", refs, b)
		}
		ref, hasRef := specOfManifest(m)["administratorLoginPassword"]
		meta := m.Object["metadata"].(map[string]any)
		ann := meta["annotations"].(map[string]any)
		_, hashed := ann[armresource.AnnotationAppliedHash]
		if ann[armresource.AnnotationReconcilePolicy] != "skip" || meta["finalizers"] != nil {
			t.Errorf("skip: annotations %v, finalizers %v; want the policy and no finalizer", ann, meta["finalizers"])
		}
		if refs {
			if !reflect.DeepEqual(ref, map[string]any{"name": "shop-pg-secret", "key": "administratorLoginPassword"}) || hashed {
				t.Errorf("with references: %v (applied-hash %t)", ref, hashed)
			}
			if !strings.Contains(string(b), "# (kubectl create secret generic shop-pg-secret --from-literal=administratorLoginPassword=...)") {
				t.Errorf("no comment on the Secret to create:\n%s", b)
			}
			continue
		}
		if hasRef || !hashed {
			t.Errorf("without references: administratorLoginPassword %v (applied-hash %t)", ref, hashed)
		}
		if !strings.Contains(string(b), "# spec.administratorLoginPassword is not imported") {
			t.Errorf("no comment on the password:\n%s", b)
		}
	}
}

// Types without a typed kind: the generic kind, ARM's members as free JSON, owners by name
// with group and kind (a resource group, or another generic resource), Azure name and type
// and api-version always written.
func TestGenericKindMapping(t *testing.T) {
	ns := rg + "/providers/Microsoft.ServiceBus/namespaces/Orders"
	ms := imported(t, Options{ReconcilePolicy: "detach-on-delete"},
		[2]string{rg, `{"location":"westus2"}`},
		[2]string{ns, `{"location":"westus2","sku":{"name":"Standard","tier":"Standard"},"identity":{"type":"SystemAssigned","principalId":"p","tenantId":"t"},"properties":{"provisioningState":"Succeeded","minimumTlsVersion":"1.2"},"systemData":{}}`},
		[2]string{ns + "/queues/new-orders", `{"properties":{"maxDeliveryCount":10,"lockDuration":"PT1M"}}`},
		[2]string{sub + "/resourceGroups/other/providers/Microsoft.Network/virtualNetworks/vnet1", `{"location":"westus2","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]}}}`},
	)
	for azName, want := range map[string]string{
		"Orders":     `{"apiVersion":"2099-01-01","azureName":"Orders","identity":{"type":"SystemAssigned"},"location":"westus2","owner":{"group":"resources.azure.com","kind":"ResourceGroup","name":"team-rg"},"properties":{"minimumTlsVersion":"1.2"},"sku":{"name":"Standard","tier":"Standard"},"type":"Microsoft.ServiceBus/namespaces"}`,
		"new-orders": `{"apiVersion":"2099-01-01","azureName":"new-orders","owner":{"group":"cerulean.dev","kind":"AzureResource","name":"orders"},"properties":{"lockDuration":"PT1M","maxDeliveryCount":10},"type":"Microsoft.ServiceBus/namespaces/queues"}`,
		"vnet1":      `{"apiVersion":"2099-01-01","azureName":"vnet1","location":"westus2","owner":{"armId":"` + sub + `/resourceGroups/other"},"properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]}},"type":"Microsoft.Network/virtualNetworks"}`,
	} {
		m := ms[azName]
		if m.Object["apiVersion"] != "cerulean.dev/v1alpha1" || m.Object["kind"] != "AzureResource" {
			t.Errorf("%s: %v %v", azName, m.Object["apiVersion"], m.Object["kind"])
		}
		if got := jsonOf(t, specOfManifest(m)); got != want {
			t.Errorf("%s spec:\n got %s\nwant %s", azName, got, want)
		}
		meta := m.Object["metadata"].(map[string]any)
		if ann := meta["annotations"].(map[string]any); ann[armresource.AnnotationReconcilePolicy] != "detach-on-delete" {
			t.Errorf("%s: annotations %v", azName, ann)
		}
	}
	if name := ms["new-orders"].Object["metadata"].(map[string]any)["name"]; name != "orders-new-orders" {
		t.Errorf("the queue is named %v, want orders-new-orders", name)
	}
}

// Kubernetes names: DNS labels, children prefixed by their parent, unique per kind, at most 63.
func TestNames(t *testing.T) {
	long := strings.Repeat("Very_Long.Name", 8)
	for in, want := range map[string]string{
		"Team-RG": "team-rg", "a__b..c": "a-b-c", "-x-": "x", "UPPER": "upper",
	} {
		if got := dnsLabel(in); got != want {
			t.Errorf("dnsLabel(%q) = %q, want %q", in, got, want)
		}
	}
	if got := dnsLabel(long); len(got) > 63 || !strings.HasPrefix(got, "very-long-name") {
		t.Errorf("dnsLabel(long) = %q", got)
	}
	if got := dnsLabel("___"); !strings.HasPrefix(got, "resource-") {
		t.Errorf("dnsLabel(___) = %q", got)
	}
	// Two groups whose names differ only in case: both kept, neither overwritten.
	ms := imported(t, Options{}, [2]string{sub + "/resourceGroups/Shop", `{"location":"westus2"}`}, [2]string{sub + "/resourceGroups/shop", `{"location":"westus2"}`})
	a, b := ms["Shop"].Object["metadata"].(map[string]any)["name"], ms["shop"].Object["metadata"].(map[string]any)["name"]
	if a == b {
		t.Errorf("two groups share the name %v", a)
	}
}

// The YAML: apiVersion, kind, metadata, spec in order; strings that look like numbers quoted.
func TestYAML(t *testing.T) {
	m := Manifest{Object: map[string]any{"spec": map[string]any{"version": "16", "n": int64(32)}, "kind": "K", "apiVersion": "g/v", "metadata": map[string]any{"name": "x"}},
		Comments: []string{"line one", "line two"}}
	b, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want := "# line one\n# line two\napiVersion: g/v\nkind: K\nmetadata:\n  name: x\nspec:\n  \"n\": 32\n  version: \"16\"\n"
	if string(b) != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", b, want)
	}
	var back map[string]any
	if err := yaml.Unmarshal(b, &back); err != nil || back["spec"].(map[string]any)["version"] != "16" {
		t.Errorf("read back %v: %v", back, err)
	}
}

// Bad flags are refused before anything is read.
func TestBadFlags(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		o    CLIOptions
		want string
	}{
		{CLIOptions{IDs: []string{rg}, APIVersions: []string{"2021-11-01"}}, `--api-version "2021-11-01": want TYPE=VERSION`},
		{CLIOptions{IDs: []string{rg}, ReconcilePolicy: "adopt"}, `reconcile policy "adopt": want manage, skip or detach-on-delete`},
	} {
		tc.o.Getenv = env
		if err := RunCLI(t.Context(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
}
