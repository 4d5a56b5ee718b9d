package armresource

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/api/shared"
)

func TestTypeAllowed(t *testing.T) {
	allowed := []string{"Microsoft.ServiceBus/namespaces", " microsoft.eventhub/* ", ""}
	for typ, want := range map[string]bool{
		"Microsoft.ServiceBus/namespaces":               true,
		"MICROSOFT.SERVICEBUS/NAMESPACES":               true,
		"Microsoft.ServiceBus/namespaces/queues":        false, // a child is a type of its own
		"Microsoft.EventHub/namespaces":                 true,
		"Microsoft.EventHub/namespaces/eventhubs":       true,
		"Microsoft.EventHubX/namespaces":                false,
		"Microsoft.EventHub":                            false,
		"Microsoft.DocumentDB/databaseAccounts":         false,
		"Microsoft.ServiceBus/namespacesAndMore/queues": false,
	} {
		if got := TypeAllowed(allowed, typ); got != want {
			t.Errorf("TypeAllowed(%s) = %v, want %v", typ, got, want)
		}
	}
	if TypeAllowed(nil, "Microsoft.ServiceBus/namespaces") {
		t.Error("an empty allow-list allowed a type")
	}
	if TypeAllowed([]string{"/*", "*"}, "Microsoft.ServiceBus/namespaces") {
		t.Error("an empty prefix allowed a type")
	}
}

func TestGenericIDs(t *testing.T) {
	k := genericKind()
	rg := "/subscriptions/s/resourceGroups/rg"
	for _, tc := range []struct {
		owner, typ, name, want, err string
	}{
		{rg, "Microsoft.ServiceBus/namespaces", "ns", rg + "/providers/Microsoft.ServiceBus/namespaces/ns", ""},
		{rg + "/providers/Microsoft.ServiceBus/namespaces/ns", "Microsoft.ServiceBus/namespaces/queues", "q",
			rg + "/providers/Microsoft.ServiceBus/namespaces/ns/queues/q", ""},
		// An extension resource on any resource.
		{rg + "/providers/Microsoft.Storage/storageAccounts/sa", "Microsoft.Insights/diagnosticSettings", "d",
			rg + "/providers/Microsoft.Storage/storageAccounts/sa/providers/Microsoft.Insights/diagnosticSettings/d", ""},
		// A queue under an Event Hubs namespace, or under a group, is not the type the spec names.
		{rg + "/providers/Microsoft.EventHub/namespaces/ns", "Microsoft.ServiceBus/namespaces/queues", "q", "", "Microsoft.EventHub/namespaces/queues"},
		{rg, "Microsoft.ServiceBus/namespaces/queues", "q", "", "no resource type"},
	} {
		id := tc.owner + k.idSuffix(tc.typ, tc.name)
		err := checkIDType(id, tc.typ)
		if tc.err == "" {
			if err != nil || id != tc.want {
				t.Errorf("%s %s under %s: %s, %v; want %s", tc.typ, tc.name, tc.owner, id, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, errInvalidSpec) || !contains(err.Error(), tc.err) {
			t.Errorf("%s under %s: %v, want an invalid spec naming %s", tc.typ, tc.owner, err, tc.err)
		}
	}
	for id, want := range map[string]string{
		"/subscriptions/s": "",
		rg:                 "",
		rg + "/providers/Microsoft.Network/virtualNetworks/v/subnets/a":        "Microsoft.Network/virtualNetworks/subnets",
		rg + "/providers/Microsoft.Network/virtualNetworks/v/subnets":          "",
		"/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/r": "Microsoft.Authorization/roleDefinitions",
	} {
		if got := typeOfID(id); got != want {
			t.Errorf("typeOfID(%s) = %q, want %q", id, got, want)
		}
	}
}

func TestGenericTarget(t *testing.T) {
	obj := func(typ, ver string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"type": typ, "apiVersion": ver}}}
	}
	r := New(nil, Options{Kind: genericKind(), GenericResourceTypes: []string{"Microsoft.ServiceBus/namespaces"}})
	if typ, ver, err := r.target(obj("microsoft.servicebus/namespaces", "2021-11-01")); err != nil || typ != "microsoft.servicebus/namespaces" || ver != "2021-11-01" {
		t.Errorf("allowed type: %s %s %v", typ, ver, err)
	}
	if _, _, err := r.target(obj("Microsoft.DocumentDB/databaseAccounts", "2021-11-01")); !errors.Is(err, errTypeNotAllowed) ||
		!contains(err.Error(), "Microsoft.DocumentDB/databaseAccounts") || !contains(err.Error(), "--generic-resource-types") {
		t.Errorf("disallowed type: %v", err)
	}
	for _, o := range []*unstructured.Unstructured{obj("servicebus", "2021-11-01"), obj("Microsoft.ServiceBus/namespaces", "latest"), obj("", "")} {
		if _, _, err := r.target(o); !errors.Is(err, errInvalidSpec) {
			t.Errorf("%v: %v, want an invalid spec", o.Object, err)
		}
	}
	o := classify(errTypeNotAllowed, time.Hour, func(d time.Duration) time.Duration { return d })
	if o.Reason != ReasonTypeNotAllowed || o.Severity != shared.SeverityError || o.Retry != RetryNever {
		t.Errorf("classify: %+v", o)
	}
}

// The generic body is the spec's ARM members: type and apiVersion address the resource and are
// not sent; every ARM id in the body is a reference the grants check.
func TestGenericBodyAndReferences(t *testing.T) {
	spec := map[string]any{
		"owner": map[string]any{"armId": "/subscriptions/s/resourceGroups/rg"}, "type": "Microsoft.Network/virtualNetworks/subnets",
		"apiVersion": "2024-05-01", "azureName": "a", "operatorSpec": map[string]any{"action": "listKeys"},
		"properties": map[string]any{"addressPrefix": "10.0.0.0/24",
			"networkSecurityGroup": map[string]any{"id": "/subscriptions/s/resourceGroups/other/providers/Microsoft.Network/networkSecurityGroups/n"}},
	}
	body, err := armBody(spec, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := dropGenericKeys(t.Context(), nil, body); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(body); !slices.Equal(keys, []string{"properties"}) {
		t.Errorf("body keys %v, want properties only", keys)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cerulean.dev/v1alpha1", "kind": "AzureResource", "spec": spec}}
	refs := References(u)
	for _, want := range []string{"/subscriptions/s/resourceGroups/rg", "/subscriptions/s/resourceGroups/other/providers/Microsoft.Network/networkSecurityGroups/n"} {
		if !slices.Contains(refs, want) {
			t.Errorf("references %v lack %s", refs, want)
		}
	}
	u.SetAPIVersion("resources.azure.com/v1api20200601")
	u.SetKind("ResourceGroup")
	if refs := References(u); len(refs) != 1 {
		t.Errorf("a typed kind's references %v: only armId references count", refs)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
