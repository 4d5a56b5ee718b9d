package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/webhook/certs"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

func setup(t *testing.T) (client.Client, *kubernetes.Clientset, string) {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	c, err := client.New(cp.RESTConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := "certs-" + strings.ToLower(t.Name())
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return c, cs, ns
}

// serve runs the workload identity webhook with r's certificate on a free loopback port.
func serve(t *testing.T, c client.Client, r *certs.Rotator) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){r.TLSOpt}})
	srv.Register(wi.Path, &wi.Handler{Reader: c})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	return fmt.Sprintf("https://127.0.0.1:%d", port)
}

// servedCert dials addr trusting only bundle, as kube-apiserver does with a caBundle, and returns
// the certificate the server presented.
func servedCert(t *testing.T, url string, bundle []byte) (*x509.Certificate, error) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("bundle has no certificate")
	}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func injectedBundle(t *testing.T, c client.Client) []byte {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: wi.ConfigurationName}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Webhooks[0].ClientConfig.CABundle
}

func caSecret(t *testing.T, c client.Client, ns string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: certs.DefaultSecretName}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func countCerts(bundle []byte) int { return strings.Count(string(bundle), "BEGIN CERTIFICATE") }

// mutated creates a labelled pod and reports whether kube-apiserver called the webhook over TLS
// (the pod came back with the token volume).
func mutated(t *testing.T, cs *kubernetes.Clientset, ns string) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Labels: map[string]string{wi.UseLabel: "true"}}}
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		got, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && len(got.Spec.Volumes) > 0 && got.Spec.Volumes[len(got.Spec.Volumes)-1].Name == wi.TokenVolume {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod not mutated: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Two manager replicas share one CA through the Secret, each serves its own leaf that kube-apiserver
// trusts through the injected bundle; a CA rotation forced through the clock keeps the old CA in the
// bundle until it expires, so both replicas keep being trusted across it.
func TestTwoReplicasShareTheCAAndRotateIt(t *testing.T) {
	c, cs, ns := setup(t)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakePassiveClock(time.Now())
	opts := certs.Options{
		Namespace: ns, MutatingWebhooks: []string{wi.ConfigurationName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		// Short validities so that a rotation fits in the hour of clock skew leaves allow: the
		// kube-apiserver verifying them runs on the real clock.
		CAValidity: 60 * time.Minute, CertValidity: 30 * time.Minute, Clock: clock,
	}
	a, err := certs.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := certs.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	urlA, urlB := serve(t, c, a), serve(t, c, b)
	if err := wi.Apply(t.Context(), c, registration.ClientConfig{URL: urlA}); err != nil {
		t.Fatal(err)
	}

	// Both replicas start at once and race to create the CA.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range []*certs.Rotator{a, b} {
		wg.Go(func() { errs[i] = r.Ensure(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	bundle := injectedBundle(t, c)
	if countCerts(bundle) != 1 || string(bundle) != string(caSecret(t, c, ns).Data[certs.CABundleKey]) || string(a.CABundle()) != string(bundle) {
		t.Fatalf("injected bundle %q is not the Secret's one CA", bundle)
	}
	certA, err := servedCert(t, urlA, bundle)
	if err != nil {
		t.Fatalf("replica A is not trusted through the bundle: %v", err)
	}
	certB, err := servedCert(t, urlB, bundle)
	if err != nil {
		t.Fatalf("replica B is not trusted through the bundle: %v", err)
	}
	if certA.Equal(certB) {
		t.Error("the replicas serve the same leaf; each should issue its own")
	}
	if err := mutated(t, cs, ns); err != nil {
		t.Fatalf("kube-apiserver does not reach replica A: %v", err)
	}

	// Past two thirds of the CA's life: A renews the CA; the bundle holds both CAs.
	oldCA := caSecret(t, c, ns).Data[certs.CACertKey]
	clock.SetTime(clock.Now().Add(45 * time.Minute))
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := caSecret(t, c, ns)
	if string(s.Data[certs.CACertKey]) == string(oldCA) {
		t.Fatal("the CA was not rotated")
	}
	bundle = injectedBundle(t, c)
	if countCerts(bundle) != 2 || !strings.Contains(string(bundle), string(oldCA)) || !strings.HasPrefix(string(bundle), string(s.Data[certs.CACertKey])) {
		t.Fatalf("after rotation the injected bundle has %d certificates, want the new CA then the old", countCerts(bundle))
	}
	newA, err := servedCert(t, urlA, []byte(s.Data[certs.CACertKey]))
	if err != nil {
		t.Fatalf("replica A does not serve a leaf of the new CA: %v", err)
	}
	if newA.Equal(certA) {
		t.Error("replica A kept its old leaf")
	}
	// B has not looked yet: its old leaf is still trusted through the bundle.
	if _, err := servedCert(t, urlB, bundle); err != nil {
		t.Fatalf("replica B's leaf of the old CA is not trusted during the rotation: %v", err)
	}
	if err := b.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if string(caSecret(t, c, ns).Data[certs.CACertKey]) != string(s.Data[certs.CACertKey]) {
		t.Error("replica B rotated the CA again")
	}
	if _, err := servedCert(t, urlB, s.Data[certs.CACertKey]); err != nil {
		t.Fatalf("replica B does not serve a leaf of the new CA: %v", err)
	}
	if err := mutated(t, cs, ns); err != nil {
		t.Fatalf("kube-apiserver does not reach replica A after the rotation: %v", err)
	}

	// Once the old CA has expired it leaves the bundle.
	clock.SetTime(clock.Now().Add(20 * time.Minute))
	if err := b.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if bundle = injectedBundle(t, c); countCerts(bundle) != 1 || strings.Contains(string(bundle), string(oldCA)) {
		t.Errorf("the expired CA is still in the bundle (%d certificates)", countCerts(bundle))
	}
}

func TestDamagedSecretIsNotReplaced(t *testing.T) {
	c, _, ns := setup(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certs.DefaultSecretName}, Data: map[string][]byte{certs.CACertKey: []byte("garbage")}}
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	r, err := certs.New(c, certs.Options{Namespace: ns, DNSNames: []string{"svc.ns.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Ensure(t.Context())
	if !errors.Is(err, certs.ErrDamagedSecret) || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("err = %v, want ErrDamagedSecret saying how to recover", err)
	}
	if got := caSecret(t, c, ns); string(got.Data[certs.CACertKey]) != "garbage" {
		t.Error("the damaged secret was overwritten")
	}
	if _, err := r.GetCertificate(nil); err == nil {
		t.Error("a certificate was served without a CA")
	}
}

// The Helm chart creates the CA Secret empty, with its labels, so that uninstalling removes it:
// the first replica fills it (keeping the chart's labels) and a second one reads the same CA.
func TestEmptySecretIsFilled(t *testing.T) {
	c, _, ns := setup(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certs.DefaultSecretName, Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}}, Type: corev1.SecretTypeOpaque}
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	var bundles [][]byte
	for range 2 {
		r, err := certs.New(c, certs.Options{Namespace: ns, DNSNames: []string{"svc.ns.svc"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Ensure(t.Context()); err != nil {
			t.Fatalf("ensure over the chart's empty secret: %v", err)
		}
		if _, err := r.GetCertificate(nil); err != nil {
			t.Errorf("no serving certificate: %v", err)
		}
		bundles = append(bundles, r.CABundle())
	}
	got := caSecret(t, c, ns)
	if len(got.Data[certs.CACertKey]) == 0 || len(got.Data[certs.CAKeyKey]) == 0 || string(got.Data[certs.CABundleKey]) != string(bundles[0]) {
		t.Errorf("the secret was not filled with the CA the rotator uses (keys %d)", len(got.Data))
	}
	if string(bundles[0]) != string(bundles[1]) {
		t.Error("a second replica made a CA of its own instead of reading the first one's")
	}
	if got.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("the chart's labels were dropped: %v", got.Labels)
	}
}
