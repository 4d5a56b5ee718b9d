package helmchart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cerulean/cerulean/internal/helmchart"
	"github.com/cerulean/cerulean/internal/webhook/armgrants"
	"github.com/cerulean/cerulean/internal/webhook/podidentity"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

const (
	release   = "cerulean"
	namespace = "cerulean-system"
)

// allOn turns every option on: both DaemonSets, the manager's workload identity, a private
// cloud's endpoints and CA, the metrics Service, the proxy sidecar's images.
var allOn = []string{
	"manager.webhook.proxyImage=mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.5.1",
	"manager.webhook.proxyInitImage=mcr.microsoft.com/oss/azure/workload-identity/proxy-init:v1.5.1",
	"nodeAgent.enabled=true", "csiProvider.enabled=true", "manager.metrics.service=true",
	"azure.tenantID=72f988bf-86f1-41af-91ab-2d7cd011db47", "azure.subscriptionID=00000000-0000-0000-0000-000000000000",
	"azure.authorityHost=https://login.example.test/", "azure.resourceManagerEndpoint=https://management.example.test/",
	"azure.resourceManagerAudience=https://management.example.test/",
	"azure.caBundle=-----BEGIN CERTIFICATE-----",
	"manager.credential.clientID=11111111-1111-1111-1111-111111111111",
	"manager.syncPeriod=15m", "manager.targetNamespaces={a,b}",
}

func helm(t *testing.T) (*helmchart.Helm, string) {
	t.Helper()
	h, err := helmchart.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chart, err := helmchart.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	return h, chart
}

func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	h, chart := helm(t)
	objs, err := h.Template(t.Context(), chart, release, namespace, set...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the one object of kind named name, converted to out.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) bool {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatalf("convert %s %s: %v", kind, o.GetName(), err)
			}
			return true
		}
	}
	return false
}

func TestLint(t *testing.T) {
	h, chart := helm(t)
	for _, set := range [][]string{nil, allOn, {"manager.credential.type=secret", "manager.credential.secretName=aso-controller-settings", "manager.podIdentity=off"}} {
		args := []string{"lint", chart, "--strict"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := h.Run(t.Context(), args...); err != nil {
			t.Errorf("lint %v: %v\n%s", set, err, out)
		}
	}
}

// Every object the chart renders, with default values and with all options on, is one a user can
// rely on: the kinds expected, in the release's namespace, and nothing of cert-manager.
func TestRenderedObjects(t *testing.T) {
	for name, tc := range map[string]struct {
		set  []string
		want []string
	}{
		"default": {nil, []string{"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Deployment", "Lease",
			"MutatingWebhookConfiguration", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"}},
		"all on": {allOn, []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "DaemonSet", "Deployment", "Lease",
			"MutatingWebhookConfiguration", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, tc.set...)
			var kinds []string
			for _, o := range objs {
				if !slices.Contains(kinds, o.GetKind()) {
					kinds = append(kinds, o.GetKind())
				}
				if strings.Contains(o.GetAPIVersion(), "cert-manager.io") {
					t.Errorf("%s %s is cert-manager's", o.GetKind(), o.GetName())
				}
				for k := range o.GetAnnotations() {
					if strings.HasPrefix(k, "cert-manager.io/") {
						t.Errorf("%s %s has cert-manager's annotation %s", o.GetKind(), o.GetName(), k)
					}
				}
				clusterScoped := slices.Contains([]string{"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
					"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, o.GetKind())
				if !clusterScoped && o.GetNamespace() != namespace {
					t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
				}
				if o.GetKind() != "CustomResourceDefinition" && o.GetLabels()["app.kubernetes.io/instance"] != release {
					t.Errorf("%s %s lacks the release's labels", o.GetKind(), o.GetName())
				}
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, tc.want) {
				t.Errorf("kinds = %v, want %v", kinds, tc.want)
			}
		})
	}
}

// The manager: two replicas with leader election, probes on its health port, metrics, the
// webhook Service it is told about, and a PodDisruptionBudget that keeps one.
func TestManager(t *testing.T) {
	objs := render(t)
	var d appsv1.Deployment
	if !find(t, objs, "Deployment", "", &d) {
		t.Fatal("no Deployment")
	}
	if ptr.Deref(d.Spec.Replicas, 0) != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"manager", "--leader-elect=true", "--health-addr=:8081", "--metrics-addr=:8080", "--webhook-port=9443",
		"--webhook-host=0.0.0.0", "--webhook-service=cerulean-webhook", "--webhook-namespace=" + namespace} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %+v liveness %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent || c.Image != "cerulean.local/cerulean:dev" {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	var svc corev1.Service
	if !find(t, objs, "Service", "cerulean-webhook", &svc) {
		t.Fatal("no webhook Service")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" ||
		!reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("webhook Service %+v does not send 443 to the manager's webhook port", svc.Spec)
	}
	var pdb policyv1.PodDisruptionBudget
	if !find(t, objs, "PodDisruptionBudget", "", &pdb) {
		t.Fatal("no PodDisruptionBudget")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget %+v does not keep one manager", pdb.Spec)
	}
	// The generic kind's allow-list: none by default, the value's list as one flag.
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--generic-resource-types") }) {
		t.Errorf("args %v allow generic types by default", c.Args)
	}
	if !find(t, render(t, "manager.genericResourceTypes={Microsoft.ServiceBus/namespaces,Microsoft.EventHub/*}"), "Deployment", "", &d) ||
		!slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--generic-resource-types=Microsoft.ServiceBus/namespaces,Microsoft.EventHub/*") {
		t.Errorf("genericResourceTypes did not reach the flag: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	// One replica: no budget that would block every drain.
	if find(t, render(t, "manager.replicas=1"), "PodDisruptionBudget", "", &pdb) {
		t.Error("a PodDisruptionBudget for a single replica")
	}
}

// The proxy sidecar's images reach the manager's flags, and only when set.
func TestManagerProxyImages(t *testing.T) {
	args := func(set ...string) []string {
		t.Helper()
		var d appsv1.Deployment
		if !find(t, render(t, set...), "Deployment", "", &d) {
			t.Fatal("no Deployment")
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	for _, a := range args() {
		if strings.HasPrefix(a, "--proxy-") {
			t.Errorf("default values give %s", a)
		}
	}
	got := args("manager.webhook.proxyImage=reg.example/proxy:v1.5.1", "manager.webhook.proxyInitImage=reg.example/proxy-init:v1.5.1")
	for _, want := range []string{"--proxy-image=reg.example/proxy:v1.5.1", "--proxy-init-image=reg.example/proxy-init:v1.5.1"} {
		if !slices.Contains(got, want) {
			t.Errorf("args %v lack %s", got, want)
		}
	}
}

// The node agent's DNAT settings reach its flags; it needs no iptables lock from the host (its
// rules go over netlink).
func TestNodeAgentFlags(t *testing.T) {
	args := func(set ...string) ([]string, []corev1.Volume) {
		t.Helper()
		var ds appsv1.DaemonSet
		if !find(t, render(t, append([]string{"nodeAgent.enabled=true"}, set...)...), "DaemonSet", "cerulean-node-agent", &ds) {
			t.Fatal("no node agent DaemonSet")
		}
		return ds.Spec.Template.Spec.Containers[0].Args, ds.Spec.Template.Spec.Volumes
	}
	got, volumes := args()
	for _, v := range volumes {
		if v.HostPath != nil {
			t.Errorf("the node agent mounts %s from the host", v.HostPath.Path)
		}
	}
	if !slices.Contains(got, "--pod-interfaces=cni0") || slices.ContainsFunc(got, func(a string) bool {
		return strings.HasPrefix(a, "--nft-table") || a == "--keep-rules-on-exit"
	}) {
		t.Errorf("default args %v: want --pod-interfaces=cni0 and the agent's own defaults otherwise", got)
	}
	got, _ = args("nodeAgent.podInterfaces={cni0,veth+}", "nodeAgent.nftTable=my-table", "nodeAgent.keepRulesOnExit=true")
	for _, want := range []string{"--pod-interfaces=cni0,veth+", "--nft-table=my-table", "--keep-rules-on-exit"} {
		if !slices.Contains(got, want) {
			t.Errorf("args %v lack %s", got, want)
		}
	}
}

// Security contexts: every container non-root, read-only, without escalation and with every
// capability dropped; the node agent alone runs as root with NET_ADMIN added, in the node's
// network; the CSI provider runs as root (its socket goes in the driver's root-owned directory)
// and adds nothing.
func TestSecurityContexts(t *testing.T) {
	objs := render(t, allOn...)
	pods := map[string]corev1.PodSpec{}
	var d appsv1.Deployment
	find(t, objs, "Deployment", "", &d)
	pods["manager"] = d.Spec.Template.Spec
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			var ds appsv1.DaemonSet
			find(t, objs, "DaemonSet", o.GetName(), &ds)
			pods[ds.Spec.Template.Labels["app.kubernetes.io/component"]] = ds.Spec.Template.Spec
		}
	}
	if len(pods) != 3 {
		t.Fatalf("pods of %v, want manager, node-agent, csi-provider", slices.Collect(func(yield func(string) bool) {
			for k := range pods {
				yield(k)
			}
		}))
	}
	for component, p := range pods {
		if p.HostNetwork != (component == "node-agent") {
			t.Errorf("%s: hostNetwork %v", component, p.HostNetwork)
		}
		if p.HostPID || p.HostIPC {
			t.Errorf("%s: host PID or IPC namespace", component)
		}
		for _, c := range append(p.InitContainers, p.Containers...) {
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s/%s: no security context", component, c.Name)
				continue
			}
			root := component == "node-agent" || component == "csi-provider"
			nonRoot := ptr.Deref(sc.RunAsNonRoot, false) || (sc.RunAsNonRoot == nil && p.SecurityContext != nil && ptr.Deref(p.SecurityContext.RunAsNonRoot, false))
			if nonRoot == root {
				t.Errorf("%s/%s: runAsNonRoot %v", component, c.Name, nonRoot)
			}
			if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) || ptr.Deref(sc.Privileged, false) {
				t.Errorf("%s/%s: readOnlyRootFilesystem %v, allowPrivilegeEscalation %v, privileged %v", component, c.Name,
					sc.ReadOnlyRootFilesystem, sc.AllowPrivilegeEscalation, sc.Privileged)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s/%s: capabilities %+v, want ALL dropped", component, c.Name, sc.Capabilities)
			}
			var add []corev1.Capability
			if sc.Capabilities != nil {
				add = sc.Capabilities.Add
			}
			if want := map[bool][]corev1.Capability{true: {"NET_ADMIN"}}[component == "node-agent"]; !slices.Equal(add, want) {
				t.Errorf("%s/%s: adds %v, want %v", component, c.Name, add, want)
			}
		}
	}
}

// The webhook configurations are exactly the ones the manager registers itself through the
// Service (the manager re-applies them at start; any difference would flap), with no CA bundle:
// the manager injects it.
func TestWebhookConfigurations(t *testing.T) {
	objs := render(t)
	svc := &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: "cerulean-webhook", Port: ptr.To[int32](443)}
	wantM, err := workloadidentity.Configuration(registration.ClientConfig{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if !find(t, objs, "MutatingWebhookConfiguration", workloadidentity.ConfigurationName, &m) {
		t.Fatalf("no MutatingWebhookConfiguration %s", workloadidentity.ConfigurationName)
	}
	if !reflect.DeepEqual(m.Webhooks, wantM.Webhooks) {
		t.Errorf("mutating webhooks differ from the manager's:\nchart:\n%s\nmanager:\n%s", dump(m.Webhooks), dump(wantM.Webhooks))
	}
	// What compat.md promises users, stated once more on its own.
	w := m.Webhooks[0]
	if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Fail || ptr.Deref(w.TimeoutSeconds, 0) != 3 ||
		w.ObjectSelector == nil || w.ObjectSelector.MatchLabels["azure.workload.identity/use"] != "true" ||
		ptr.Deref(w.ReinvocationPolicy, "") != admissionregistrationv1.IfNeededReinvocationPolicy || ptr.Deref(w.ClientConfig.Service.Path, "") != "/mutate-v1-pod" {
		t.Errorf("workload identity webhook:\n%s", dump(w))
	}
	if len(w.ClientConfig.CABundle) != 0 {
		t.Error("the chart sets a CA bundle; the manager injects it")
	}
	wantV, err := podidentity.Configuration(registration.ClientConfig{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if !find(t, objs, "ValidatingWebhookConfiguration", podidentity.ConfigurationName, &v) {
		t.Fatalf("no ValidatingWebhookConfiguration %s", podidentity.ConfigurationName)
	}
	if !reflect.DeepEqual(v.Webhooks, wantV.Webhooks) {
		t.Errorf("validating webhooks differ from the manager's:\nchart:\n%s\nmanager:\n%s", dump(v.Webhooks), dump(wantV.Webhooks))
	}
	// Pod identity off: the manager serves no check, so none may be registered.
	if find(t, render(t, "manager.podIdentity=off"), "ValidatingWebhookConfiguration", podidentity.ConfigurationName, &v) {
		t.Error("pod identity's webhook registered with pod identity off")
	}
	// The scopes check: as the manager registers it, also with the switch that turns the scope
	// checks off (it still refuses export expressions that do not compile).
	wantG, err := armgrants.Configuration(registration.ClientConfig{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	var g admissionregistrationv1.ValidatingWebhookConfiguration
	if !find(t, objs, "ValidatingWebhookConfiguration", armgrants.ConfigurationName, &g) {
		t.Fatalf("no ValidatingWebhookConfiguration %s", armgrants.ConfigurationName)
	}
	if !reflect.DeepEqual(g.Webhooks, wantG.Webhooks) {
		t.Errorf("arm grants webhooks differ from the manager's:\nchart:\n%s\nmanager:\n%s", dump(g.Webhooks), dump(wantG.Webhooks))
	}
	if !find(t, render(t, "manager.allowUngrantedScopes=true"), "ValidatingWebhookConfiguration", armgrants.ConfigurationName, &g) {
		t.Error("the ARM kinds' check is not registered with --allow-ungranted-scopes: bad expressions would pass admission")
	}
}

// The roles are the generated ones (config/rbac, from the markers), not a hand-written copy.
func TestRBACIsGenerated(t *testing.T) {
	objs := render(t, allOn...)
	chart, _ := helmchart.ChartDir()
	for name, file := range map[string]string{"cerulean-manager": "role.yaml", "cerulean-node-agent": "node-agent/role.yaml"} {
		b, err := os.ReadFile(filepath.Join(chart, "..", "..", "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		var want rbacv1.ClusterRole
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		var got rbacv1.ClusterRole
		if !find(t, objs, "ClusterRole", name, &got) {
			t.Fatalf("no ClusterRole %s", name)
		}
		if !reflect.DeepEqual(got.Rules, want.Rules) {
			t.Errorf("ClusterRole %s differs from config/rbac/%s:\nchart:\n%s\ngenerated:\n%s", name, file, dump(got.Rules), dump(want.Rules))
		}
		var binding rbacv1.ClusterRoleBinding
		if !find(t, objs, "ClusterRoleBinding", name, &binding) || binding.RoleRef.Name != name || len(binding.Subjects) != 1 ||
			binding.Subjects[0].Name != name || binding.Subjects[0].Namespace != namespace {
			t.Errorf("ClusterRoleBinding %s %+v does not bind the role to its ServiceAccount", name, binding)
		}
	}
	// The CRDs are the generated ones too.
	bases, _ := filepath.Glob(filepath.Join(chart, "..", "..", "config", "crd", "bases", "*.yaml"))
	var crds int
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds++
		}
	}
	if len(bases) == 0 || crds != len(bases) {
		t.Errorf("%d CRDs rendered, %d generated", crds, len(bases))
	}
}

// The manager's own credential is workload identity by default, through a token it projects
// itself: its pod does not carry the opt-in label, or it could not start while its own webhook is
// down. With a private cloud, every component trusts its CA.
func TestCloudValues(t *testing.T) {
	objs := render(t, allOn...)
	var d appsv1.Deployment
	find(t, objs, "Deployment", "", &d)
	p := d.Spec.Template.Spec
	if _, ok := d.Spec.Template.Labels["azure.workload.identity/use"]; ok {
		t.Error("the manager's pod asks its own webhook for its token")
	}
	env := map[string]string{}
	for _, e := range p.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{
		"AZURE_CLIENT_ID": "11111111-1111-1111-1111-111111111111", "USE_WORKLOAD_IDENTITY_AUTH": "true",
		"AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token", "AZURE_TENANT_ID": "72f988bf-86f1-41af-91ab-2d7cd011db47",
		"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000", "AZURE_AUTHORITY_HOST": "https://login.example.test/",
		"AZURE_RESOURCE_MANAGER_ENDPOINT": "https://management.example.test/", "AZURE_RESOURCE_MANAGER_AUDIENCE": "https://management.example.test/",
		"SSL_CERT_FILE": "/etc/cerulean/cloud-ca/ca.crt", "AZURE_SYNC_PERIOD": "15m", "AZURE_TARGET_NAMESPACES": "a,b",
	} {
		if env[k] != v {
			t.Errorf("manager env %s = %q, want %q", k, env[k], v)
		}
	}
	var token *corev1.ServiceAccountTokenProjection
	for _, v := range p.Volumes {
		if v.Projected != nil && len(v.Projected.Sources) == 1 {
			token = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if token == nil || token.Audience != "api://AzureADTokenExchange" || token.Path != "azure-identity-token" {
		t.Errorf("projected token %+v", token)
	}
	var sa corev1.ServiceAccount
	if !find(t, objs, "ServiceAccount", "cerulean-manager", &sa) || sa.Annotations["azure.workload.identity/client-id"] != env["AZURE_CLIENT_ID"] {
		t.Errorf("manager ServiceAccount annotations %v", sa.Annotations)
	}
	var cm corev1.ConfigMap
	if !find(t, objs, "ConfigMap", "", &cm) || !strings.Contains(cm.Data["ca.crt"], "BEGIN CERTIFICATE") {
		t.Errorf("cloud CA ConfigMap %+v", cm.Data)
	}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		find(t, objs, "DaemonSet", o.GetName(), &ds)
		found := false
		for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
			found = found || e.Name == "SSL_CERT_FILE"
		}
		if !found {
			t.Errorf("DaemonSet %s does not trust the cloud's CA", ds.Name)
		}
	}

	// A secret instead: its keys become the environment, and no token is projected.
	objs = render(t, "manager.credential.type=secret", "manager.credential.secretName=aso-controller-settings")
	find(t, objs, "Deployment", "", &d)
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "aso-controller-settings" {
		t.Errorf("envFrom %+v", c.EnvFrom)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			t.Error("a token projected for a secret credential")
		}
	}
}

// Values that cannot work fail at render time, naming the value.
func TestBadValues(t *testing.T) {
	h, chart := helm(t)
	for set, want := range map[string]string{
		"manager.credential.type=password":                         "manager.credential.type",
		"manager.credential.type=secret":                           "manager.credential.secretName",
		"manager.podIdentity=sometimes":                            "manager.podIdentity",
		"manager.credential.clientID=abc-def":                      "azure.tenantID",
		"manager.webhook.proxyImage=reg.example/proxy:v1":          "manager.webhook.proxyInitImage",
		"manager.webhook.proxyInitImage=reg.example/proxy-init:v1": "set both or neither",
	} {
		_, err := h.Template(t.Context(), chart, release, namespace, set)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: err = %v, want one naming %s", set, err, want)
		}
	}
}

func dump(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
