package workloadidentity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/pki"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	"github.com/cerulean/cerulean/internal/webhook/webhooktest"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const clientID = "11111111-2222-3333-4444-555555555555"

var whCfg = wi.Config{TenantID: "99999999-8888-7777-6666-555555555555", AuthorityHost: "https://127.0.0.1:8443/"}

// warnings collects the admission warnings kube-apiserver relays to the client.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

func newPod(name, sa string, labelled bool, annotations map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	if labelled {
		p.Labels = map[string]string{wi.UseLabel: "true"}
	}
	p.Spec.ServiceAccountName = sa
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}, {Name: "skipped", Image: "app"}}
	return p
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func tokenVolume(p *corev1.Pod) *corev1.ServiceAccountTokenProjection {
	for _, v := range p.Spec.Volumes {
		if v.Name == wi.TokenVolume && v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					return s.ServiceAccountToken
				}
			}
		}
	}
	return nil
}

func setup(t *testing.T) (*kubernetes.Clientset, *warnings, *rest.Config, string) {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	cfg := rest.CopyConfig(cp.RESTConfig)
	w := &warnings{}
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for name, ann := range map[string]map[string]string{
		"app":       {wi.ClientIDAnnotation: clientID, wi.TokenExpirationAnnotation: "7200"},
		"no-client": nil,
	} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return cs, w, cfg, ns
}

func TestLabelledPodsAreMutatedAtCreate(t *testing.T) {
	cs, w, _, ns := setup(t)
	webhooktest.Start(t, devenvtest.ControlPlane(t).RESTConfig, whCfg, ns)
	w.take()
	ctx := t.Context()

	p, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("labelled", "app", true, map[string]string{wi.SkipContainersAnnotation: "skipped"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ws := w.take(); len(ws) != 0 {
		t.Errorf("warnings for a fully annotated service account: %q", ws)
	}
	want := map[string]string{
		wi.ClientIDEnv: clientID, wi.TenantIDEnv: whCfg.TenantID, wi.AuthorityHostEnv: whCfg.AuthorityHost,
		wi.TokenFileEnv: "/var/run/secrets/azure/tokens/azure-identity-token",
	}
	for _, c := range []corev1.Container{p.Spec.InitContainers[0], p.Spec.Containers[0]} {
		got := envOf(c)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("container %s: %s=%q, want %q", c.Name, k, got[k], v)
			}
		}
		if !hasTokenMount(c) {
			t.Errorf("container %s has no token mount: %+v", c.Name, c.VolumeMounts)
		}
	}
	if skipped := p.Spec.Containers[1]; len(envOf(skipped)) != 0 || hasTokenMount(skipped) {
		t.Errorf("the skipped container was mutated: %+v", skipped)
	}
	v := tokenVolume(p)
	if v == nil || v.Audience != wi.DefaultAudience || v.ExpirationSeconds == nil || *v.ExpirationSeconds != 7200 || v.Path != wi.TokenVolume {
		t.Errorf("token volume %+v, want audience %s, 7200 s from the service account", v, wi.DefaultAudience)
	}
	// The stored pod is the mutated one.
	stored, err := cs.CoreV1().Pods(ns).Get(ctx, "labelled", metav1.GetOptions{})
	if err != nil || tokenVolume(stored) == nil {
		t.Errorf("stored pod has no token volume (err %v)", err)
	}

	p, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("unlabelled", "app", false, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tokenVolume(p) != nil || len(envOf(p.Spec.Containers[0])) != 0 {
		t.Errorf("an unlabelled pod was mutated: %+v", p.Spec)
	}

	p, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("no-client", "no-client", true, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := envOf(p.Spec.Containers[0])
	if _, ok := got[wi.ClientIDEnv]; ok || got[wi.TenantIDEnv] != whCfg.TenantID || tokenVolume(p) == nil {
		t.Errorf("service account without client id: env %v volume %v", got, tokenVolume(p))
	}
	if ws := strings.Join(w.take(), "\n"); !strings.Contains(ws, "has no azure.workload.identity/client-id annotation") {
		t.Errorf("warnings %q, want the missing client id", ws)
	}

	_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("too-long", "app", true, map[string]string{wi.TokenExpirationAnnotation: "90000"}), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `azure.workload.identity/service-account-token-expiration="90000": want whole seconds from 3600 to 86400`) {
		t.Errorf("out-of-bounds expiration: err %v", err)
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("no-sa", "missing", true, nil), metav1.CreateOptions{})
	// The API server's ServiceAccount admission or the webhook refuses it, naming the account.
	if err == nil || !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a pod of a missing service account: err %v, want the service account named", err)
	}
}

func hasTokenMount(c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == wi.TokenVolume && m.MountPath == wi.TokenMountPath && m.ReadOnly {
			return true
		}
	}
	return false
}

// With the webhook down, failurePolicy Fail refuses labelled pods instead of admitting them
// without their identity; pods that did not opt in are not affected (the objectSelector).
func TestFailurePolicyFailWhenTheWebhookIsDown(t *testing.T) {
	cs, _, _, ns := setup(t)
	s := webhooktest.Start(t, devenvtest.ControlPlane(t).RESTConfig, whCfg, ns)
	s.Stop()

	_, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("labelled", "app", true, nil), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), wi.WebhookName) {
		t.Fatalf("a labelled pod with the webhook down: err %v, want a failed call of %s", err, wi.WebhookName)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("plain", "app", false, nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("an unlabelled pod with the webhook down: %v", err)
	}
}

// Another mutating webhook that runs after this one adds a container; reinvocationPolicy
// IfNeeded makes kube-apiserver call this webhook again, so the added container gets the
// identity too, and what was injected the first time is not injected twice.
func TestReinvocationReachesContainersAddedLater(t *testing.T) {
	cs, _, _, ns := setup(t)
	rc := devenvtest.ControlPlane(t).RESTConfig
	webhooktest.Start(t, rc, whCfg, ns)

	inject := admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		p := &corev1.Pod{}
		if err := admission.NewDecoder(scheme.Scheme).Decode(req, p); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		for _, c := range p.Spec.Containers {
			if c.Name == "late-sidecar" {
				return admission.Allowed("already there")
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "late-sidecar", Image: "sidecar"})
		raw, err := json.Marshal(p)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, raw)
	})
	srv := httptest.NewTLSServer(&webhook.Admission{Handler: inject})
	defer srv.Close()
	// Configurations are called in name order: this one after cerulean-workload-identity.
	later, err := wi.Configuration(registration.ClientConfig{URL: srv.URL, CABundle: pki.EncodeCert(srv.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	later.Name = "zz-late-sidecar-injector"
	later.Webhooks[0].Name = "late-sidecar.example.com"
	later.Webhooks[0].ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), later.Name, metav1.DeleteOptions{})
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("late", "app", true, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(p.Spec.Containers); n == 3 {
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				names := map[string]int{}
				for _, e := range c.Env {
					names[e.Name]++
				}
				if names[wi.ClientIDEnv] != 1 || names[wi.TokenFileEnv] != 1 {
					t.Errorf("container %s env %v: want each variable once", c.Name, c.Env)
				}
				if !hasTokenMount(c) {
					t.Errorf("container %s has no token mount", c.Name)
				}
			}
			volumes := 0
			for _, v := range p.Spec.Volumes {
				if v.Name == wi.TokenVolume {
					volumes++
				}
			}
			if volumes != 1 {
				t.Errorf("%d token volumes, want 1", volumes)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the late webhook never added its container")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requestLog records the API requests a manager makes for service accounts.
type requestLog struct {
	mu   sync.Mutex
	list []string // "GET /api/v1/...?... Accept: ..."
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if strings.Contains(r.URL.Path, "/serviceaccounts") {
			l.mu.Lock()
			l.list = append(l.list, r.Method+" "+r.URL.RequestURI()+" Accept: "+r.Header.Get("Accept"))
			l.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestServiceAccountsComeFromAMetadataCache: the webhook as Setup wires it into a manager reads
// service accounts from the manager's cache, which watches only their metadata (all the webhook
// reads), so an admission costs no API request and the cache no service account's spec.
func TestServiceAccountsComeFromAMetadataCache(t *testing.T) {
	_, _, _, ns := setup(t)
	rc := rest.CopyConfig(devenvtest.ControlPlane(t).RESTConfig)
	log := &requestLog{}
	rc.WrapTransport = log.wrap
	mgr, err := ctrl.NewManager(rc, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := wi.Setup(mgr, whCfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = mgr.GetCache().Start(ctx) }()
	// Until the cache runs, the handler reads from the API server (the manager serves webhooks
	// before it starts its caches).
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}
	// The handler as the webhook server serves it (TLS aside).
	mux := mgr.GetWebhookServer().WebhookMux()
	for i := range 5 {
		p := newPod(fmt.Sprintf("p%d", i), "app", true, nil)
		p.Namespace = ns
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(i)), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: ns, Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: raw}},
		})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, wi.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("response %d %s: %v", w.Code, w.Body, err)
		}
		if !review.Response.Allowed || len(review.Response.Patch) == 0 {
			t.Fatalf("pod %d not mutated: %+v", i, review.Response)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	metadataWatch := false
	for _, r := range log.list {
		if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/serviceaccounts/") {
			t.Errorf("a service account read from the API server, not the cache: %s", r)
		}
		if strings.Contains(r, "watch=true") && strings.Contains(r, "as=PartialObjectMetadata") {
			metadataWatch = true
		}
	}
	if !metadataWatch {
		t.Errorf("no metadata-only watch of service accounts; requests: %q", log.list)
	}
}

// TestProxySidecarThroughTheAPIServer: the patch that puts the proxy's sidecar in front of the
// pod's init containers and its init container behind them, as kube-apiserver applies it.
func TestProxySidecarThroughTheAPIServer(t *testing.T) {
	cs, _, _, ns := setup(t)
	withProxy := whCfg
	withProxy.ProxyImage, withProxy.ProxyInitImage = "proxy:1", "proxy-init:1"
	webhooktest.Start(t, devenvtest.ControlPlane(t).RESTConfig, withProxy, ns)
	p := newPod("proxied", "app", true, map[string]string{wi.InjectProxyAnnotation: "true"})
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://10.0.0.1:3128"}}
	got, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got.Spec.InitContainers {
		names = append(names, c.Name)
		if envOf(c)[wi.ClientIDEnv] != clientID || !hasTokenMount(c) {
			t.Errorf("init container %s: env %v mounts %v", c.Name, c.Env, c.VolumeMounts)
		}
	}
	if want := []string{wi.ProxySidecarContainerName, "init", wi.ProxyInitContainerName}; !slices.Equal(names, want) {
		t.Errorf("init containers %v, want %v", names, want)
	}
	if side := got.Spec.InitContainers[0]; envOf(side)["HTTPS_PROXY"] != "http://10.0.0.1:3128" || side.Image != "proxy:1" {
		t.Errorf("sidecar %+v", side)
	}
	if envOf(got.Spec.Containers[0])[wi.ClientIDEnv] != clientID || tokenVolume(got) == nil {
		t.Errorf("app container or token volume not mutated: %+v", got.Spec)
	}
}
