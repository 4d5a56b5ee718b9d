package manager_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// A bad manifest is refused by the schema with a clear message; one the schema cannot judge
// ends terminal (severity Error, no retry) with the reason; unknown ASO fields are kept.
func TestBadManifestsAndUnknownFields(t *testing.T) {
	c := kube(t)
	ns := namespace(t, c)

	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want string
	}{
		{obj(msiAPI, "FederatedIdentityCredential", "bad-name", map[string]any{"azureName": "-x", "owner": map[string]any{"name": "i"},
			"audiences": []any{"api://AzureADTokenExchange"}, "issuer": "https://issuer", "subject": "s"}), "spec.azureName"},
		{obj(msiAPI, "FederatedIdentityCredential", "two-issuers", map[string]any{"owner": map[string]any{"name": "i"},
			"audiences": []any{"api://AzureADTokenExchange"}, "issuer": "https://issuer", "issuerFromConfig": map[string]any{"name": "a", "key": "b"}, "subject": "s"}),
			"exactly one of issuer and issuerFromConfig"},
		{obj(rgAPI, "ResourceGroup", "no-location", map[string]any{}), "spec.location"},
		{obj("storage.azure.com/v1api20230101", "StorageAccount", "bad-sku", map[string]any{"location": "westus2", "owner": map[string]any{"name": "rg"},
			"kind": "StorageV2", "sku": map[string]any{"name": "Bogus"}}), "spec.sku.name"},
	} {
		tc.obj.SetNamespace(ns)
		err := c.Create(t.Context(), tc.obj)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("create %s: got %v, want a rejection naming %q", tc.obj.GetName(), err, tc.want)
		}
	}

	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	startManager(t, az, time.Minute, ns)
	rg := resourceGroup("terminal-rg", nil)
	if err := unstructured.SetNestedField(rg.Object, "kept", "spec", "someAsoFieldCeruleanIgnores"); err != nil {
		t.Fatal(err)
	}
	ra := obj("authorization.azure.com/v1api20220401", "RoleAssignment", "no-such-role", map[string]any{
		"owner":                   map[string]any{"name": "terminal-rg", "group": "resources.azure.com", "kind": "ResourceGroup"},
		"principalId":             "00000000-0000-0000-0000-000000000001",
		"roleDefinitionReference": map[string]any{"wellKnownName": "Chief Everything Officer"},
	})
	create(t, c, ns, rg, ra)
	waitReady(t, c, rg, time.Minute)
	if v, _, _ := unstructured.NestedString(get(t, c, ns, "terminal-rg", rg).Object, "spec", "someAsoFieldCeruleanIgnores"); v != "kept" {
		t.Errorf("an unknown spec field was not kept: %q", v)
	}
	eventually(t, time.Minute, "terminal condition", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "no-such-role", ra))
		return st == "False" && sev == "Error" && reason == "ReconciliationFailedPermanently" && strings.Contains(msg, "Chief Everything Officer"),
			st + " " + sev + " " + reason + ": " + msg
	})
	since := az.RequestLog().Last()
	time.Sleep(3 * time.Second)
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", PathPrefix: "/subscriptions/" + az.Settings().SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions", Since: since}); n != 0 {
		t.Errorf("a terminal failure was retried: %d role lookups after it", n)
	}
}
