package webhooks_test

import (
	"context"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/webhook/webhooks"
	"github.com/cerulean/cerulean/internal/webhook/webhooktest"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

// A controller-runtime manager set up the way `cerulean manager` does under `cerulean up`:
// certificates of its own, served on loopback, registered by URL; kube-apiserver mutates a
// labelled pod through it, with the service account read from the manager's cache.
func TestManagerServesTheWebhookOnLoopback(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "managed"
	for _, obj := range []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
				Name: "app", Annotations: map[string]string{wi.ClientIDAnnotation: "11111111-2222-3333-4444-555555555555"},
			}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := obj(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	w, err := webhooks.New(cp.RESTConfig, webhooks.Options{
		Namespace: ns, Host: "127.0.0.1", Port: port,
		WorkloadIdentity: wi.Config{TenantID: "99999999-8888-7777-6666-555555555555", AuthorityHost: "https://127.0.0.1:1/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cp.RESTConfig, ctrl.Options{WebhookServer: w.Server(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	webhooktest.WaitMutating(t, cp.RESTConfig, ns)

	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{wi.UseLabel: "true"}}}
	p.Spec.ServiceAccountName = "app"
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range got.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[wi.ClientIDEnv] != "11111111-2222-3333-4444-555555555555" || env[wi.AuthorityHostEnv] != "https://127.0.0.1:1/" {
		t.Errorf("pod env %v", env)
	}
	cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, wi.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.Webhooks[0].ClientConfig.CABundle) != string(w.Rotator().CABundle()) || len(w.Rotator().CABundle()) == 0 {
		t.Error("the configuration does not carry the manager's CA bundle")
	}
}
