package helmchart_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// manager.metrics.serviceMonitor=true renders a ServiceMonitor that selects the manager's
// metrics Service (and no other of the release's Services) and scrapes its metrics port; off by
// default, since the kind exists only where the Prometheus Operator is installed.
func TestServiceMonitor(t *testing.T) {
	for _, o := range render(t) {
		if o.GetKind() == "ServiceMonitor" {
			t.Fatalf("a ServiceMonitor by default: %s", o.GetName())
		}
	}
	objs := render(t, "manager.metrics.serviceMonitor=true")
	var sm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" {
			sm = o
		}
	}
	if sm == nil {
		t.Fatal("no ServiceMonitor with manager.metrics.serviceMonitor=true")
	}
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != namespace {
		t.Errorf("ServiceMonitor %s in %q", sm.GetAPIVersion(), sm.GetNamespace())
	}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("endpoints %v, want the metrics port's /metrics", endpoints)
	}
	var selected []string
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		svc := &corev1.Service{}
		find(t, []*unstructured.Unstructured{o}, "Service", o.GetName(), svc)
		if labels.SelectorFromSet(match).Matches(labels.Set(svc.Labels)) {
			selected = append(selected, svc.Name)
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != 8080 {
				t.Errorf("Service %s ports %v, want metrics 8080", svc.Name, svc.Spec.Ports)
			}
		}
	}
	if len(selected) != 1 {
		t.Errorf("the ServiceMonitor selects Services %v, want the manager's metrics Service alone", selected)
	}
}

// The CSI provider serves its metrics on the pod's address at the upstream provider's port,
// declared as the container's metrics port.
func TestCSIProviderMetricsPort(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	if !find(t, render(t, "csiProvider.enabled=true"), "DaemonSet", release+"-csi-provider", ds) {
		t.Fatal("no CSI provider DaemonSet")
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--metrics-addr=:8898") {
		t.Errorf("args %v lack --metrics-addr=:8898", c.Args)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 8898 {
		t.Errorf("ports %v, want metrics 8898", c.Ports)
	}
}
