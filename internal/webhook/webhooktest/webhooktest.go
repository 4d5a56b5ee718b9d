// Package webhooktest serves the workload identity webhook in a test the way `cerulean-local up`
// serves it: on loopback, with a certificate of a CA of its own, registered with kube-apiserver
// by URL. Only tests import it.
package webhooktest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cerulean/cerulean/internal/pki"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// Server is a running webhook.
type Server struct {
	URL   string
	CAPEM []byte
	// Err is what the server returned once stopped.
	Err    error
	cancel context.CancelFunc
	done   chan error
}

// Start serves the webhook with cfg, registers it and returns once kube-apiserver calls it
// (a dry-run pod in namespace ns comes back mutated). It stops when the test ends.
func Start(t testing.TB, rc *rest.Config, cfg wi.Config, ns string) *Server {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA(pkix.Name{CommonName: "test webhook CA"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	der, key, err := ca.Issue(x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	c, err := client.New(rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }
	}}})
	srv.Register(wi.Path, &wi.Handler{Reader: c, Config: cfg})
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{URL: fmt.Sprintf("https://127.0.0.1:%d", port), CAPEM: ca.PEM(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Start(ctx) }()
	t.Cleanup(s.Stop)
	if err := wi.Apply(t.Context(), c, registration.ClientConfig{URL: s.URL, CABundle: s.CAPEM}); err != nil {
		t.Fatal(err)
	}
	WaitMutating(t, rc, ns)
	return s
}

// Stop stops serving (the registration stays). It is safe to call twice.
func (s *Server) Stop() {
	if s.cancel != nil {
		s.cancel()
		s.Err = <-s.done
		s.cancel = nil
	}
}

// WaitMutating dry-runs a labelled pod in ns until kube-apiserver calls the webhook: it learns of
// a new configuration through a watch, moments after it is written.
func WaitMutating(t testing.TB, rc *rest.Config, ns string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{wi.UseLabel: "true"}}}
		p.Spec.Containers = []corev1.Container{{Name: "probe", Image: "probe"}}
		got, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			for _, v := range got.Spec.Volumes {
				if v.Name == wi.TokenVolume {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver does not call the webhook: last error %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
