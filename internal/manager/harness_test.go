package manager_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ceruleanv1alpha1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/manifests"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

var crdOnce sync.Once

// kube returns an admin client of the shared control plane with the CRDs installed.
func kube(t testing.TB) client.Client {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() { applyCRDs(t, c) })
	return c
}

func applyCRDs(t testing.TB, _ client.Client) {
	if err := manager.InstallCRDs(t.Context(), devenvtest.ControlPlane(t).RESTConfig); err != nil {
		t.Fatal(err)
	}
}

// readObjects decodes every YAML document of a file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// samples are config/samples' objects, in file order.
func samples(t *testing.T) []*unstructured.Unstructured {
	files, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		out = append(out, readObjects(t, f)...)
	}
	return out
}

// namespace creates a fresh namespace, with the cluster-oidc ConfigMap the samples read.
func namespace(t testing.TB, c client.Client) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	grantAll(t, c, name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "cluster-oidc"},
		Data: map[string]string{"issuerURL": devenvtest.ControlPlane(t).IssuerURL}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	return name
}

// azureConfig is the global credential: the cloud's bootstrap principal.
func azureConfig(c *cloud.Cloud) azure.Config {
	s := c.Settings()
	return azure.Config{
		TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
		AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
		ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
	}
}

// startManager runs the manager in-process until the returned stop is called (or the test ends).
func startManager(t *testing.T, c *cloud.Cloud, syncPeriod time.Duration, namespaces ...string) (stop func()) {
	t.Helper()
	return startManagerAs(t, azureConfig(c), syncPeriod, namespaces...)
}

// startManagerAs runs the manager with cfg as its global credential.
func startManagerAs(t *testing.T, cfg azure.Config, syncPeriod time.Duration, namespaces ...string) (stop func()) {
	t.Helper()
	return startManagerWith(t, cfg, syncPeriod, 100*time.Millisecond, namespaces...)
}

// startManagerWith runs the manager with cfg as its global credential and the given longest
// wait between polls of a running operation.
func startManagerWith(t *testing.T, cfg azure.Config, syncPeriod, pollInterval time.Duration, namespaces ...string) (stop func()) {
	t.Helper()
	return startManagerOpts(t, manager.Options{Azure: cfg, SyncPeriod: syncPeriod, PollInterval: pollInterval, TargetNamespaces: namespaces})
}

// startManagerOpts runs the manager with opts, its API server, logger and listeners set here.
func startManagerOpts(t testing.TB, opts manager.Options) (stop func()) {
	t.Helper()
	cfg, namespaces := opts.Azure, opts.TargetNamespaces
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &cloudtest.SyncBuffer{}
	opts.REST = devenvtest.ControlPlane(t).RESTConfig
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	opts.HealthAddr, opts.SkipNameValidation = "0", true
	opts.Logger = logr.FromSlogHandler(cloudtest.DebugLogger(logs).Handler())
	go func() { done <- manager.Run(ctx, opts) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
			if t.Failed() {
				t.Logf("manager log:\n%s", tail(logs.String(), 60))
			}
			if strings.Contains(logs.String(), cfg.ClientSecret) {
				t.Errorf("the manager logged the client secret")
			}
		})
	}
	t.Cleanup(stop)
	t.Cleanup(func() { deleteAll(t, namespaces) }) // runs first, while the manager still runs
	return stop
}

// deleteAll deletes every object of the manager's kinds in the namespaces and waits until they
// are gone, so that no object with a finalizer outlives its test's manager (a CRD deletion in a
// later test would wait for it).
func deleteAll(t testing.TB, namespaces []string) {
	c := kube(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range armresource.Kinds() {
		for _, ns := range namespaces {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(k.GVK)
			_ = c.DeleteAllOf(ctx, u, client.InNamespace(ns))
		}
	}
	for _, k := range armresource.Kinds() {
		for _, ns := range namespaces {
			for {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) == 0 {
					break
				}
				if ctx.Err() != nil {
					t.Errorf("cleanup: %d %s left in %s", len(list.Items), k.GVK.Kind, ns)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get reads an object of u's kind.
func get(t testing.TB, c client.Client, ns, name string, like *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(like.GroupVersionKind())
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("get %s %s: %v", like.GetKind(), name, err)
	}
	return u
}

// ready returns the Ready condition's status, severity, reason and message.
func ready(u *unstructured.Unstructured) (status, severity, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m := x.(map[string]any)
		if m["type"] == "Ready" {
			s := func(k string) string { v, _ := m[k].(string); return v }
			return s("status"), s("severity"), s("reason"), s("message")
		}
	}
	return "", "", "", ""
}

// waitReady waits for Ready=True on the object.
func waitReady(t testing.TB, c client.Client, u *unstructured.Unstructured, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	eventually(t, timeout, u.GetKind()+" "+u.GetName()+" Ready", func() (bool, string) {
		got = &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), got); err != nil {
			return false, err.Error()
		}
		st, sev, reason, msg := ready(got)
		return st == "True", fmt.Sprintf("%s %s %s: %s", st, sev, reason, msg)
	})
	return got
}

// create creates the objects in ns.
func create(t testing.TB, c client.Client, ns string, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		u.SetNamespace(ns)
		if err := c.Create(t.Context(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// waitGone waits for the object to disappear from Kubernetes.
func waitGone(t testing.TB, c client.Client, u *unstructured.Unstructured, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, u.GetKind()+" "+u.GetName()+" gone", func() (bool, string) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(t.Context(), client.ObjectKeyFromObject(u), got)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		_, _, reason, msg := ready(got)
		return false, fmt.Sprintf("still there (finalizers %v) %s: %s", got.GetFinalizers(), reason, msg)
	})
}

func obj(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}, "spec": spec}}
	return u
}

func devenvIssuer(t *testing.T) string { return devenvtest.ControlPlane(t).IssuerURL }

// grantAll gives the test's namespace every identity and ARM scope: tests not about grants run
// as a cluster admin's trusted tenant (security_test.go is about grants).
func grantAll(t testing.TB, c client.Client, ns string) {
	t.Helper()
	g := &ceruleanv1alpha1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "test-" + ns},
		Spec: ceruleanv1alpha1.NamespaceGrantSpec{Namespaces: []string{ns}, Identities: []string{"*"}, Scopes: []string{"/subscriptions/*"}}}
	if err := c.Create(t.Context(), g); err != nil {
		t.Fatalf("grant namespace %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
}
