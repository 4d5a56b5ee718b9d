package manager_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// operatorSpec entries of Azure Service Operator's schema that Cerulean does not produce are
// accepted under strict field validation (kubectl's default) and kept; the resource goes Ready,
// its message and one Warning Event name each entry not exported, and the entries Cerulean does
// produce are exported as before.
func TestUnknownOperatorSpecEntriesKeptAndReported(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const syncPeriod = 2 * time.Second
	startManager(t, az, syncPeriod, ns)

	// ASO's ManagedCluster kubeconfig secrets, which Cerulean does not produce, pass the schema.
	mc := obj("containerservice.azure.com/v1api20240901", "ManagedCluster", "aso-aks", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "ops-rg"}, "dnsPrefix": "aso-aks",
		"operatorSpec": map[string]any{"secrets": map[string]any{
			"adminCredentials": map[string]any{"name": "aks-admin", "key": "kubeconfig"},
			"userCredentials":  map[string]any{"name": "aks-user", "key": "kubeconfig"},
		}},
	})
	mc.SetNamespace(ns)
	if err := c.Create(t.Context(), mc, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("ASO's ManagedCluster operatorSpec.secrets refused: %v", err)
	}

	// An identity naming an entry of a newer ASO schema in secrets and in configMaps.
	id := obj(msiAPI, "UserAssignedIdentity", "ops-identity", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "ops-rg"},
		"operatorSpec": map[string]any{
			"secrets": map[string]any{
				"clientId":       map[string]any{"name": "ops-identity", "key": "clientId"},
				"newerAsoExport": map[string]any{"name": "ops-identity", "key": "newer"},
			},
			"configMaps": map[string]any{"resourceUri": map[string]any{"name": "ops-identity", "key": "uri"}},
		},
	})
	rg := resourceGroup("ops-rg", nil)
	for _, u := range []*unstructured.Unstructured{rg, id} {
		u.SetNamespace(ns)
		if err := c.Create(t.Context(), u, client.FieldValidation("Strict")); err != nil {
			t.Fatalf("create %s under strict field validation: %v", u.GetKind(), err)
		}
	}
	got := waitReady(t, c, id, time.Minute)
	if _, ok, _ := unstructured.NestedMap(got.Object, "spec", "operatorSpec", "secrets", "newerAsoExport"); !ok {
		t.Error("the unknown secrets entry was not kept")
	}
	if _, ok, _ := unstructured.NestedMap(got.Object, "spec", "operatorSpec", "configMaps", "resourceUri"); !ok {
		t.Error("the unknown configMaps entry was not kept")
	}
	_, _, reason, msg := ready(got)
	if reason != "Succeeded" || !strings.Contains(msg, "secrets.newerAsoExport") || !strings.Contains(msg, "configMaps.resourceUri") || strings.Contains(msg, "secrets.clientId") {
		t.Errorf("Ready reason %q message %q; want Succeeded naming exactly the entries not exported", reason, msg)
	}
	clientID, _, _ := unstructured.NestedString(got.Object, "status", "clientId")
	sec := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ops-identity"}, sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["clientId"]) != clientID || clientID == "" || len(sec.Data) != 1 {
		t.Errorf("exported Secret keys %v; want clientId only, the identity's", keys(sec.Data))
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ops-identity"}, &corev1.ConfigMap{}); err == nil {
		t.Error("a ConfigMap was written for an entry Cerulean does not produce")
	}

	// One Warning Event names them, and the steady state adds none.
	time.Sleep(3 * syncPeriod)
	var warned []eventsv1.Event
	list := &eventsv1.EventList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == "ExportNotProduced" && e.Regarding.Name == "ops-identity" {
			warned = append(warned, e)
		}
	}
	if len(warned) != 1 || warned[0].Type != corev1.EventTypeWarning || warned[0].Series != nil || !strings.Contains(warned[0].Note, "secrets.newerAsoExport") {
		t.Errorf("ExportNotProduced Events: %+v; want one Warning naming the entries, not repeated", warned)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
