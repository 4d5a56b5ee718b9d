package manager

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

// The manager's cache holds the data of the Secrets and ConfigMaps it owns or reads at every
// reconcile, and only the metadata of the cluster's others (kubectl's copy of their data
// included); its client still reads those others' current data, from the API server.
func TestCacheHoldsOnlyTheDataTheManagerOwns(t *testing.T) {
	cp, scheme, admin, ns := cacheTestNamespace(t, "cache-scope")

	const unrelated = 40
	big := strings.Repeat("x", 8<<10)
	for i := range unrelated {
		meta := metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("unrelated-%02d", i),
			Annotations: map[string]string{lastApplied: `{"data":{"v":"` + big + `"}}`}}
		if err := admin.Create(t.Context(), &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"v": big}}); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"v": big}}); err != nil {
			t.Fatal(err)
		}
	}
	owned := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "export",
			Annotations: map[string]string{exports.AnnotationKeyOwners: `{"k":"uid"}`}}, StringData: map[string]string{"k": "exported"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "export",
			Annotations: map[string]string{exports.AnnotationKeyOwners: `{"k":"uid"}`}}, Data: map[string]string{"k": "exported"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credentials.NamespaceSecretName}, StringData: map[string]string{"k": "credential"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Finalizers: []string{credentials.FinalizerInUse}},
			StringData: map[string]string{"k": "held"}},
	}
	for _, o := range owned {
		if err := admin.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		held := &corev1.Secret{}
		if admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "held"}, held) == nil {
			held.Finalizers = nil
			_ = admin.Update(t.Context(), held)
		}
	})

	c := startCache(t, cp, scheme, ns)

	secrets := &corev1.SecretList{}
	if err := c.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	cms := &corev1.ConfigMapList{}
	if err := c.List(t.Context(), cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	withData := map[string]bool{}
	for _, s := range secrets.Items {
		if len(s.Data) > 0 {
			withData["Secret "+s.Name] = true
		}
		if _, ok := s.Annotations[lastApplied]; ok {
			t.Errorf("the cache holds Secret %s's last-applied copy", s.Name)
		}
		if len(s.ManagedFields) > 0 {
			t.Errorf("the cache holds Secret %s's managedFields", s.Name)
		}
	}
	for _, m := range cms.Items {
		if len(m.Data) > 0 {
			withData["ConfigMap "+m.Name] = true
		}
		if _, ok := m.Annotations[lastApplied]; ok {
			t.Errorf("the cache holds ConfigMap %s's last-applied copy", m.Name)
		}
	}
	want := map[string]bool{"Secret export": true, "ConfigMap export": true, "Secret " + credentials.NamespaceSecretName: true, "Secret held": true}
	if fmt.Sprint(withData) != fmt.Sprint(want) {
		t.Errorf("the cache holds the data of %v, want only %v (of %d Secrets and %d ConfigMaps listed)", withData, want, len(secrets.Items), len(cms.Items))
	}
	if len(secrets.Items) < unrelated || len(cms.Items) < unrelated {
		t.Errorf("the cache lists %d Secrets and %d ConfigMaps: their changes must still be watched", len(secrets.Items), len(cms.Items))
	}

	// The manager's client reads an unrelated Secret's current data, and sees its change.
	mc, err := newClient(cp.RESTConfig, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "unrelated-07"}
	s := &corev1.Secret{}
	if err := mc.Get(t.Context(), key, s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["v"]) != big || s.Annotations[AnnotationDataNotCached] != "" {
		t.Fatalf("the manager's client read %d bytes (annotations %v), want the Secret's data", len(s.Data["v"]), s.Annotations)
	}
	s.Data = map[string][]byte{"v": []byte("changed")}
	if err := admin.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Secret{}
	if err := mc.Get(t.Context(), key, got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["v"]) != "changed" {
		t.Errorf("after the change the manager's client read %q", got.Data["v"])
	}
	cm := &corev1.ConfigMap{}
	if err := mc.Get(t.Context(), key, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["v"] != big {
		t.Errorf("the manager's client read ConfigMap data of %d bytes", len(cm.Data["v"]))
	}
}

// The cache holds of each Pod what pod identity's assignment controller reads (labels, node,
// phase), not its containers, volumes or status details.
func TestCacheHoldsPodsCutToTheAssignmentControllersFields(t *testing.T) {
	cp, scheme, admin, ns := cacheTestNamespace(t, "cache-pods")
	env := make([]corev1.EnvVar, 50)
	for i := range env {
		env[i] = corev1.EnvVar{Name: fmt.Sprintf("V%02d", i), Value: strings.Repeat("v", 100)}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: map[string]string{"aadpodidbinding": "sel"},
		Annotations: map[string]string{lastApplied: "{}", "keep": "me"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app", Env: env}}}}
	if err := admin.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if err := admin.Status().Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}

	c := startCache(t, cp, scheme, ns)
	got := &corev1.Pod{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase == corev1.PodSucceeded || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.Labels["aadpodidbinding"] != "sel" || got.Annotations["keep"] != "me" || got.Spec.NodeName != "node-a" ||
		got.Status.Phase != corev1.PodSucceeded || got.UID != pod.UID {
		t.Errorf("the cached pod lost what the assignment controller reads: labels %v annotations %v node %q phase %q uid %q",
			got.Labels, got.Annotations, got.Spec.NodeName, got.Status.Phase, got.UID)
	}
	if len(got.Spec.Containers) != 0 || len(got.ManagedFields) != 0 || got.Annotations[lastApplied] != "" || len(got.Status.Conditions) != 0 {
		t.Errorf("the cached pod keeps %d containers, %d managedFields entries, last-applied %q, %d conditions",
			len(got.Spec.Containers), len(got.ManagedFields), got.Annotations[lastApplied], len(got.Status.Conditions))
	}
}

// cacheTestNamespace is the control plane, the manager's scheme, an admin client and a new
// namespace named from prefix, deleted after the test.
func cacheTestNamespace(t *testing.T, prefix string) (*devenv.ControlPlane, *runtime.Scheme, client.Client, string) {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cp.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%100000)
	if err := admin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	return cp, scheme, admin, ns
}

// startCache starts a cache with the manager's options on ns and waits for it to sync.
func startCache(t *testing.T, cp *devenv.ControlPlane, scheme *runtime.Scheme, ns string) cache.Cache {
	t.Helper()
	opts := cacheOptions([]string{ns})
	opts.Scheme = scheme
	c, err := cache.New(cp.RESTConfig, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	return c
}
