package importer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/arm/generic"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/manifests"
)

// cloudEnv is what `cerulean-local cloud env` exports: the CLI's credential.
func cloudEnv(az *cloud.Cloud) func(string) string {
	s := az.Settings()
	env := map[string]string{
		"AZURE_TENANT_ID": s.TenantID, "AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_CLIENT_ID": s.ClientID,
		"AZURE_CLIENT_SECRET": s.ClientSecret, "AZURE_AUTHORITY_HOST": s.AuthorityHost,
		"AZURE_RESOURCE_MANAGER_ENDPOINT": s.ResourceManagerEndpoint, "AZURE_RESOURCE_MANAGER_AUDIENCE": s.ResourceManagerAudience,
		"SSL_CERT_FILE": s.CAFile,
	}
	return func(k string) string { return env[k] }
}

// Through the real SDK against the local cloud: a resource group's resources are listed (a
// typed identity, a Service Bus namespace of the generic kind with its api-version from its
// provider), and the namespace's children are found through the provider's child types (its
// queue, and the rule Azure creates with every namespace), each owned by its parent's object;
// only reads are sent.
func TestImportFromCloud(t *testing.T) {
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := az.Settings()
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	rgID := cloudtest.CreateGroup(t, az, cred, opts, "westus2", "Import-RG")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ids.CreateOrUpdate(t.Context(), "Import-RG", "app-id", armmsi.Identity{Location: to.Ptr("westus2")}, nil); err != nil {
		t.Fatal(err)
	}
	genericClient, err := armresources.NewClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	nsID := rgID + "/providers/Microsoft.ServiceBus/namespaces/orders-bus"
	// In order: the queue needs its namespace (a map, iterated in random order, failed CI).
	for _, r := range []struct {
		id   string
		body armresources.GenericResource
	}{
		{nsID, armresources.GenericResource{Location: to.Ptr("westus2"), SKU: &armresources.SKU{Name: to.Ptr("Standard")}}},
		{nsID + "/queues/new-orders", armresources.GenericResource{Properties: map[string]any{"maxDeliveryCount": 5}}},
	} {
		p, err := genericClient.BeginCreateOrUpdateByID(t.Context(), r.id, "2021-11-01", r.body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}

	log := az.RequestLog()
	since := log.Last()
	var out bytes.Buffer
	if err := RunCLI(t.Context(), CLIOptions{IDs: []string{rgID}, Namespace: "team", ReconcilePolicy: "skip",
		Getenv: cloudEnv(az), Out: &out}); err != nil {
		t.Fatal(err)
	}
	for _, e := range log.Entries(reqlog.Filter{Service: "arm", Since: since}) {
		if e.Method != "GET" {
			t.Errorf("the import sent %s %s", e.Method, e.Path)
		}
	}
	objs, err := manifests.Decode(out.Bytes())
	if err != nil {
		t.Fatalf("the output is not YAML manifests: %v\n%s", err, out.String())
	}
	got := map[string]string{}
	for _, o := range objs {
		spec, _ := o.Object["spec"].(map[string]any)
		got[o.GetKind()+"/"+o.GetName()] = jsonOf(t, spec["owner"]) + " " + jsonOf(t, spec["apiVersion"])
		if o.GetNamespace() != "team" || o.GetAnnotations()["serviceoperator.azure.com/reconcile-policy"] != "skip" {
			t.Errorf("%s/%s: namespace %q, annotations %v", o.GetKind(), o.GetName(), o.GetNamespace(), o.GetAnnotations())
		}
	}
	newest := func(typ string) string { return `"` + newestStable(generic.Versions(typ)) + `"` }
	want := map[string]string{
		"ResourceGroup/import-rg":             "null null",
		"UserAssignedIdentity/app-id":         `{"name":"import-rg"} null`,
		"AzureResource/orders-bus":            `{"group":"resources.azure.com","kind":"ResourceGroup","name":"import-rg"} ` + newest("Microsoft.ServiceBus/namespaces"),
		"AzureResource/orders-bus-new-orders": `{"group":"cerulean.dev","kind":"AzureResource","name":"orders-bus"} ` + newest("Microsoft.ServiceBus/namespaces/queues"),
		"AzureResource/orders-bus-rootmanagesharedaccesskey": `{"group":"cerulean.dev","kind":"AzureResource","name":"orders-bus"} ` +
			newest("Microsoft.ServiceBus/namespaces/authorizationRules"),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: owner and apiVersion %s, want %s", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("imported %v, want %d objects", got, len(want))
	}
}

// Bad input: a malformed id, a resource that does not exist, one the credential may not read.
// Each error names the id; with --output nothing is written, not even what could be read.
func TestImportErrors(t *testing.T) {
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := az.Settings()
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	rgID := cloudtest.CreateGroup(t, az, cred, opts, "westus2", "present")
	missing := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/absent"

	for _, tc := range []struct {
		name string
		ids  []string
		want string
	}{
		{"malformed", []string{"resourceGroups/x"}, `import "resourceGroups/x": not an ARM resource id`},
		{"subscription", []string{"/subscriptions/" + s.SubscriptionID}, "not an ARM resource id: name a resource group or a resource"},
		{"not found", []string{rgID, missing}, "import " + missing + ": not found in Azure (ResourceGroupNotFound)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			err := RunCLI(t.Context(), CLIOptions{IDs: tc.ids, Output: dir, Getenv: cloudEnv(az), Out: &bytes.Buffer{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the output directory was created: %v", err)
			}
		})
	}

	// A principal without a role: 403, naming the id and what to do.
	_, none := cloudtest.NewPrincipal(t, az, "import-no-role")
	r, err := newSDKReader(none, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Import(t.Context(), r, Options{IDs: []string{rgID}})
	if err == nil || !strings.Contains(err.Error(), "import "+rgID+": the credential may not read it (403 AuthorizationFailed)") {
		t.Errorf("error %v, want a 403 naming %s", err, rgID)
	}
}
