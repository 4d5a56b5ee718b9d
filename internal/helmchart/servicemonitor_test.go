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

// The node agent serves aad-pod-identity's NMI series on the node's address at upstream NMI's
// port, declared as the container's metrics port; nodeAgent.metrics.podMonitor=true renders a
// PodMonitor that selects the agent's pods (no other of the release's) on that port; port 0
// turns the endpoint off.
func TestNodeAgentMetrics(t *testing.T) {
	agent := func(objs []*unstructured.Unstructured) corev1.PodTemplateSpec {
		t.Helper()
		ds := &appsv1.DaemonSet{}
		if !find(t, objs, "DaemonSet", release+"-node-agent", ds) {
			t.Fatal("no node agent DaemonSet")
		}
		return ds.Spec.Template
	}
	objs := render(t, "nodeAgent.enabled=true")
	c := agent(objs).Spec.Containers[0]
	if !slices.Contains(c.Args, "--metrics-addr=0.0.0.0:9090") {
		t.Errorf("args %v lack --metrics-addr=0.0.0.0:9090", c.Args)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 9090 }) {
		t.Errorf("ports %v lack metrics 9090", c.Ports)
	}
	for _, o := range objs {
		if o.GetKind() == "PodMonitor" {
			t.Fatalf("a PodMonitor by default: %s", o.GetName())
		}
	}

	objs = render(t, "nodeAgent.enabled=true", "csiProvider.enabled=true", "nodeAgent.metrics.podMonitor=true")
	var pm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "PodMonitor" {
			pm = o
		}
	}
	if pm == nil {
		t.Fatal("no PodMonitor with nodeAgent.metrics.podMonitor=true")
	}
	if pm.GetAPIVersion() != "monitoring.coreos.com/v1" || pm.GetNamespace() != namespace {
		t.Errorf("PodMonitor %s in %q", pm.GetAPIVersion(), pm.GetNamespace())
	}
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("endpoints %v, want the metrics port's /metrics", endpoints)
	}
	match, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	sel := labels.SelectorFromSet(match)
	if !sel.Matches(labels.Set(agent(objs).Labels)) {
		t.Errorf("the PodMonitor's selector %v does not select the node agent's pods", match)
	}
	for _, o := range objs {
		var tmpl corev1.PodTemplateSpec
		switch o.GetKind() {
		case "DaemonSet", "Deployment":
			m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			tmpl.Labels = m
		default:
			continue
		}
		if o.GetName() != release+"-node-agent" && sel.Matches(labels.Set(tmpl.Labels)) {
			t.Errorf("the PodMonitor selects the pods of %s %s too", o.GetKind(), o.GetName())
		}
	}

	c = agent(render(t, "nodeAgent.enabled=true", "nodeAgent.metrics.port=0", "nodeAgent.metrics.podMonitor=true")).Spec.Containers[0]
	if !slices.Contains(c.Args, "--metrics-addr=") || slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) {
		t.Errorf("port 0: args %v, ports %v; want --metrics-addr= and no metrics port", c.Args, c.Ports)
	}
}
