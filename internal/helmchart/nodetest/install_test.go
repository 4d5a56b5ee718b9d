// Package nodetest installs charts/cerulean with Helm into the local control plane with the real
// node, as a user installs a release: the product image (`make image`) pushed to a registry
// (the distribution project's, started by the test on loopback) and pulled from it by the node's
// containerd, the chart packaged (`make chart`) and installed from its .tgz; then every object
// accepted by kube-apiserver, the components Ready from the pulled image, the
// in-cluster webhook mutating a pod through its Service, a pod's IMDS request reaching the node
// agent through the DNAT it installs, an upgrade that rolls the manager, and an uninstall that
// leaves nothing of the release but the CRDs.
package nodetest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/helmchart"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/manifests"
	"github.com/cerulean/cerulean/internal/metricstest"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
	"github.com/cerulean/cerulean/internal/webhook/armgrants"
	"github.com/cerulean/cerulean/internal/webhook/podidentity"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m, devenvtest.WithNode()) }

const (
	release   = "cerulean"
	namespace = "cerulean-system"
	selector  = "app.kubernetes.io/instance=" + release
)

func TestInstallUpgradeUninstall(t *testing.T) {
	node := devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.CopyConfig(cp.RESTConfig)
	rc.QPS, rc.Burst = 50, 100 // the leftover check lists every kind at once
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := helmchart.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.Kubeconfig = cp.Kubeconfig
	chartDir, err := helmchart.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	repository := publish(t, node)
	chart := packageChart(t, h, chartDir)
	nodeAgentPort, nodeAgentMetricsPort := strconv.Itoa(freePort(t)), strconv.Itoa(freePort(t))
	values := []string{
		// Pulled by the node from the test's registry, at the chart's appVersion.
		"image.repository=" + repository, "image.pullPolicy=Always",
		"nodeAgent.enabled=true", "csiProvider.enabled=true",
		// The node agent shares the machine's network: a port free here, and the node's bridge
		// as the interface pods' traffic arrives on.
		"nodeAgent.port=" + nodeAgentPort, "nodeAgent.metrics.port=" + nodeAgentMetricsPort, "nodeAgent.podInterfaces={" + devenv.Bridge + "}",
		// The provider's socket in a directory of the node's, not the machine's.
		"csiProvider.providersDir=" + filepath.Join(node.Dir, "csi-providers"),
		"manager.podIdentity=managed", // no ARM writes: this cluster has no cloud
	}
	args := []string{"install", release, chart, "--namespace", namespace, "--create-namespace", "--wait", "--timeout", "3m"}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	if out, err := h.Run(ctx, args...); err != nil {
		t.Fatalf("install: %v\n%s\n%s", err, out, diagnose(ctx, cs))
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{}) })

	// Every object of the release is in the cluster, as kube-apiserver accepted it.
	manifest, err := h.Run(ctx, "get", "manifest", release, "--namespace", namespace)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restMapper(t, cs)
	names := map[string]bool{} // the release's objects, by name
	for _, o := range objs {
		names[o.GetName()] = true
		r := mapper(o.GroupVersionKind())
		var err error
		if o.GetNamespace() != "" {
			_, err = dyn.Resource(r).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		} else {
			_, err = dyn.Resource(r).Get(ctx, o.GetName(), metav1.GetOptions{})
		}
		if err != nil {
			t.Errorf("%s %s of the release: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// Ready from the local image: the manager's two replicas and both DaemonSets.
	waitReady(t, cs, 2)
	webhookCA := injectedCA(t, cs)
	serving(t, filepath.Join(node.Dir, "csi-providers", "azure.sock"), net.JoinHostPort(node.IP, nodeAgentPort))
	imdsReachesTheAgent(t, cs)
	agentMetrics(t, "http://"+net.JoinHostPort(node.IP, nodeAgentMetricsPort))

	// The in-cluster webhook, reached through its Service, mutates a labelled pod.
	mutated(t, cs, "before-upgrade")

	// An upgrade with a changed value rolls the manager; the CA it injected and its Secret stay.
	before, err := cs.AppsV1().Deployments(namespace).Get(ctx, release+"-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := h.Run(ctx, "upgrade", release, chart, "--namespace", namespace, "--reuse-values", "--set", "manager.syncPeriod=30m", "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("upgrade: %v\n%s\n%s", err, out, diagnose(ctx, cs))
	}
	after := waitReady(t, cs, 3)
	if after.Generation == before.Generation || envOf(after, "AZURE_SYNC_PERIOD") != "30m" {
		t.Errorf("upgrade: generation %d → %d, AZURE_SYNC_PERIOD %q; want a new template with 30m", before.Generation, after.Generation, envOf(after, "AZURE_SYNC_PERIOD"))
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=manager"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && envOfPod(&p, "AZURE_SYNC_PERIOD") != "30m" {
			t.Errorf("manager pod %s still runs the old template after the upgrade", p.Name)
		}
	}
	if got := injectedCA(t, cs); string(got) != string(webhookCA) {
		t.Error("the upgrade replaced the CA bundle the manager injected")
	}
	mutated(t, cs, "after-upgrade")

	// Uninstall: nothing of the release is left but the CRDs, which Helm keeps.
	if out, err := h.Run(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l := leftovers(ctx, dyn, mapper, names)
		if ctx.Err() == nil { // a pass cut short by the deadline says nothing
			left = l
		}
		return len(l) == 0, nil
	})
	if err != nil {
		t.Errorf("after uninstall, left: %s", strings.Join(left, ", "))
	}
	// The agent removed its DNAT rules from the node when its pod stopped.
	if out, err := exec.Command("nft", "list", "table", "ip", nodeagent.DefaultTable).CombinedOutput(); err == nil {
		t.Errorf("after uninstall, the node agent's nftables table is left on the node:\n%s", out)
	}
	// The CRDs stay, every one of the chart's crds/.
	files, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the chart's CRDs: %v (%d files)", err, len(files))
	}
	crdResource := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crds, err := manifests.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			if _, err := dyn.Resource(crdResource).Get(ctx, c.GetName(), metav1.GetOptions{}); err != nil {
				t.Errorf("CRD %s after uninstall: %v; Helm keeps CRDs", c.GetName(), err)
			}
		}
	}
}

// serving checks that the DaemonSets' pods serve: the CSI provider answers the driver's Version
// call on its socket in the providers directory, and the node agent answers on the node's
// address as aad-pod-identity's NMI does (its host route refuses a request naming no pod).
func serving(t *testing.T, socket, agent string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v, err := v1alpha1.NewCSIDriverProviderClient(conn).Version(ctx, &v1alpha1.VersionRequest{Version: "v1alpha1"})
	if err != nil || v.RuntimeName != "cerulean-csi-provider" {
		t.Errorf("the CSI provider's Version on %s: %+v, %v", socket, v, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+agent+"/host/token/?resource=https://vault.azure.net", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatalf("the node agent on %s: %v", agent, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "podname and podns") {
		t.Errorf("the node agent answered /host/token/ without podname and podns with %s %s, want 400 asking for them", resp.Status, body)
	}
}

// agentMetrics reads the DaemonSet's agent's metrics port: aad-pod-identity's NMI series count
// the refusals above, the host's request without pod headers and the probe pod's.
func agentMetrics(t *testing.T, base string) {
	t.Helper()
	body, err := metricstest.Scrape(base)
	if err != nil {
		t.Fatalf("the node agent's metrics: %v", err)
	}
	const nmi = "aadpodidentity_nmi_operations_duration_seconds_count"
	if got := metricstest.Sum(body, nmi, `operation_type="/host/token/"`, `status_code="400"`, `namespace=""`); got != 1 {
		t.Errorf("%s for the host's request without pod headers: %v, want 1", nmi, got)
	}
	if got := metricstest.Sum(body, nmi, `operation_type="/metadata/identity/oauth2/token"`, `status_code="403"`, `namespace="imds-probe"`); got < 1 {
		t.Errorf("%s for the probe pod's refusal: %v, want at least 1", nmi, got)
	}
}

// imdsReachesTheAgent runs a pod on the pod network that asks 169.254.169.254 for a token as
// aad-pod-identity's apps do: the DaemonSet's agent, from the one-binary image, installed the
// DNAT that brings the request to it, and it refuses the pod, which no binding selects.
func imdsReachesTheAgent(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	ns := "imds-probe"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(false), Containers: []corev1.Container{{
			Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullNever,
			Args: []string{"imds-token", "https://vault.azure.net/.default"},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed), nil
	})
	if err != nil {
		t.Fatalf("the IMDS probe pod did not finish: %v\n%s", err, diagnose(ctx, cs))
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs("app", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodFailed || !strings.Contains(string(logs), "No AzureIdentityBinding matches pod "+ns+"/app") {
		t.Errorf("a pod's IMDS request: phase %s, output %q; want the node agent's refusal", pod.Status.Phase, logs)
	}
}

// waitReady waits for the manager's Deployment (its current template on every replica) and both
// DaemonSets to be Ready, and returns the Deployment.
func waitReady(t *testing.T, cs kubernetes.Interface, step int) *appsv1.Deployment {
	t.Helper()
	ctx := t.Context()
	var d *appsv1.Deployment
	var why string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if d, err = cs.AppsV1().Deployments(namespace).Get(ctx, release+"-manager", metav1.GetOptions{}); err != nil {
			why = err.Error()
			return false, nil
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != 2 || st.ReadyReplicas != 2 || st.Replicas != 2 {
			why = fmt.Sprintf("manager %+v", st)
			return false, nil
		}
		dss, err := cs.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(dss.Items) != 2 {
			why = fmt.Sprintf("daemonsets: %v (%d)", err, len(dss.Items))
			return false, nil
		}
		for _, ds := range dss.Items {
			if ds.Status.DesiredNumberScheduled != 1 || ds.Status.NumberReady != 1 {
				why = fmt.Sprintf("%s %+v", ds.Name, ds.Status)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("step %d: not Ready: %s\n%s", step, why, diagnose(ctx, cs))
	}
	return d
}

// injectedCA waits for the manager to inject its CA into both webhook configurations and
// returns it.
func injectedCA(t *testing.T, cs kubernetes.Interface) []byte {
	t.Helper()
	var ca []byte
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, workloadidentity.ConfigurationName, metav1.GetOptions{})
		if err != nil || len(m.Webhooks) != 1 || len(m.Webhooks[0].ClientConfig.CABundle) == 0 {
			return false, nil
		}
		// Every webhook of the validating configurations (pod identity's two checks, the ARM
		// grants check) trusts the same CA.
		for _, name := range []string{podidentity.ConfigurationName, armgrants.ConfigurationName} {
			v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(v.Webhooks) == 0 {
				return false, nil
			}
			for _, w := range v.Webhooks {
				if string(w.ClientConfig.CABundle) != string(m.Webhooks[0].ClientConfig.CABundle) {
					return false, nil
				}
			}
		}
		if m.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			return false, fmt.Errorf("the manager dropped the release's labels from %s: %v", m.Name, m.Labels)
		}
		ca = m.Webhooks[0].ClientConfig.CABundle
		return true, nil
	})
	if err != nil {
		t.Fatalf("CA bundle not injected: %v", err)
	}
	return ca
}

// mutated creates a labelled pod whose ServiceAccount names a client id and checks the
// webhook's mutation: the identity's environment and the projected token.
func mutated(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := t.Context()
	ns := "app-" + name
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: map[string]string{
		"azure.workload.identity/client-id": "22222222-2222-2222-2222-222222222222",
		"azure.workload.identity/tenant-id": "33333333-3333-3333-3333-333333333333",
	}}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"azure.workload.identity/use": "true"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "app",
			// Never scheduled: the mutation at admission is what is checked.
			NodeSelector: map[string]string{"cerulean.dev/no-such-node": "true"},
			Containers:   []corev1.Container{{Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullNever}},
		},
	}
	var got *corev1.Pod
	var lastErr error
	// The first calls may find no ready endpoint yet; failurePolicy Fail refuses the pod then.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, lastErr = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("create a labelled pod: %v", lastErr)
	}
	c := got.Spec.Containers[0]
	for k, v := range map[string]string{
		"AZURE_CLIENT_ID": "22222222-2222-2222-2222-222222222222", "AZURE_TENANT_ID": "33333333-3333-3333-3333-333333333333",
		"AZURE_FEDERATED_TOKEN_FILE": workloadidentity.TokenFile,
	} {
		found := ""
		for _, e := range c.Env {
			if e.Name == k {
				found = e.Value
			}
		}
		if found != v {
			t.Errorf("%s: %s = %q, want %q (env %v)", name, k, found, v, c.Env)
		}
	}
	projected := false
	for _, v := range got.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				projected = projected || (s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == "api://AzureADTokenExchange")
			}
		}
	}
	if !projected {
		t.Errorf("%s: no projected token with audience api://AzureADTokenExchange", name)
	}
}

// leftovers lists what the release left: any object carrying its instance label or named as one
// of the release's objects, in the kinds the chart makes (and their children), and the manager's
// fixed-name objects.
func leftovers(ctx context.Context, dyn dynamic.Interface, mapper func(schema.GroupVersionKind) schema.GroupVersionResource, names map[string]bool) []string {
	var left []string
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ServiceAccount"},
		{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "apps", Version: "v1", Kind: "ControllerRevision"},
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, {Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
		{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
	} {
		list, err := dyn.Resource(mapper(gvk)).List(ctx, metav1.ListOptions{})
		if err != nil {
			left = append(left, fmt.Sprintf("list %s: %v", gvk.Kind, err))
			continue
		}
		for _, o := range list.Items {
			ours := o.GetLabels()["app.kubernetes.io/instance"] == release || names[o.GetName()] ||
				slices.Contains([]string{workloadidentity.ConfigurationName, podidentity.ConfigurationName, "cerulean-webhook-ca", "cerulean-manager.cerulean.dev"}, o.GetName())
			if ours {
				left = append(left, gvk.Kind+" "+o.GetNamespace()+"/"+o.GetName())
			}
		}
	}
	return left
}

func restMapper(t *testing.T, cs kubernetes.Interface) func(schema.GroupVersionKind) schema.GroupVersionResource {
	t.Helper()
	lists, err := cs.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	m := map[schema.GroupVersionKind]schema.GroupVersionResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				m[gv.WithKind(r.Kind)] = gv.WithResource(r.Name)
			}
		}
	}
	return func(gvk schema.GroupVersionKind) schema.GroupVersionResource {
		r, ok := m[gvk]
		if !ok {
			t.Fatalf("kube-apiserver serves no %s", gvk)
		}
		return r
	}
}

func envOf(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envOfPod(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// diagnose describes the release's pods and their last log lines, for a failed wait.
func diagnose(ctx context.Context, cs kubernetes.Interface) string {
	var b strings.Builder
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: phase %s, conditions %+v\n", p.Name, p.Status.Phase, p.Status.Conditions)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s ready %v state %+v last %+v\n", c.Name, c.Ready, c.State, c.LastTerminationState)
		}
		tail := int64(15)
		for _, prev := range []bool{false, true} {
			logs, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail, Previous: prev}).DoRaw(ctx)
			if err == nil {
				fmt.Fprintf(&b, "  logs (previous %v):\n%s\n", prev, logs)
			} else if !apierrors.IsBadRequest(err) {
				fmt.Fprintf(&b, "  logs: %v\n", err)
			}
		}
	}
	evs, _ := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if evs != nil {
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}
