package devenv

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/pki"
)

// pkiFiles names every certificate and key the control plane uses, under DIR/pki.
type pkiFiles struct {
	dir string
}

func (p pkiFiles) path(name string) string { return filepath.Join(p.dir, name) }

func (p pkiFiles) caCert() string      { return p.path("ca.crt") }
func (p pkiFiles) caKey() string       { return p.path("ca.key") }
func (p pkiFiles) servingCert() string { return p.path("serving.crt") }
func (p pkiFiles) servingKey() string  { return p.path("serving.key") }
func (p pkiFiles) adminCert() string   { return p.path("admin.crt") }
func (p pkiFiles) adminKey() string    { return p.path("admin.key") }
func (p pkiFiles) kcmCert() string     { return p.path("kube-controller-manager.crt") }
func (p pkiFiles) kcmKey() string      { return p.path("kube-controller-manager.key") }
func (p pkiFiles) schedCert() string   { return p.path("kube-scheduler.crt") }
func (p pkiFiles) schedKey() string    { return p.path("kube-scheduler.key") }

// kube-proxy's and CoreDNS's client certificates: system:kube-proxy is bound to
// system:node-proxier by kube-apiserver's default RBAC, system:coredns by the node.
func (p pkiFiles) kubeProxyCert() string { return p.path("kube-proxy.crt") }
func (p pkiFiles) kubeProxyKey() string  { return p.path("kube-proxy.key") }
func (p pkiFiles) coreDNSCert() string   { return p.path("coredns.crt") }
func (p pkiFiles) coreDNSKey() string    { return p.path("coredns.key") }

// The kubelet's identities: its client certificate (the node's user), the certificate it serves
// on the node's address, and kube-apiserver's client certificate for calling it.
func (p pkiFiles) nodeCert() string           { return p.path("kubelet.crt") }
func (p pkiFiles) nodeKey() string            { return p.path("kubelet.key") }
func (p pkiFiles) kubeletServingCert() string { return p.path("kubelet-serving.crt") }
func (p pkiFiles) kubeletServingKey() string  { return p.path("kubelet-serving.key") }
func (p pkiFiles) apiserverKubeletCert() string {
	return p.path("apiserver-kubelet-client.crt")
}
func (p pkiFiles) apiserverKubeletKey() string { return p.path("apiserver-kubelet-client.key") }
func (p pkiFiles) saSigningKey() string        { return p.path("service-account.key") }
func (p pkiFiles) saVerifyingKey() string      { return p.path("service-account.pub") }

// ensure creates whatever is missing; existing files are kept so a restart keeps its identity.
func (p pkiFiles) ensure(now time.Time) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	ca, err := pki.LoadOrCreateCA(p.caCert(), p.caKey(), pkix.Name{CommonName: "cerulean-local-ca"}, now)
	if err != nil {
		return err
	}
	leaves := []struct {
		cert, key string
		tmpl      x509.Certificate
	}{
		{p.servingCert(), p.servingKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: "cerulean-local-control-plane"},
			DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(APIServerServiceIP)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{p.adminCert(), p.adminKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: "cerulean-admin", Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{p.kcmCert(), p.kcmKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: "system:kube-controller-manager"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{p.schedCert(), p.schedKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: "system:kube-scheduler"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{p.kubeProxyCert(), p.kubeProxyKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: "system:kube-proxy"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{p.coreDNSCert(), p.coreDNSKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: coreDNSUser},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{p.nodeCert(), p.nodeKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: "system:node:" + NodeName, Organization: []string{"system:nodes"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{p.kubeletServingCert(), p.kubeletServingKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: NodeName},
			DNSNames:    []string{NodeName},
			IPAddresses: []net.IP{net.ParseIP(NodeIP)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{p.apiserverKubeletCert(), p.apiserverKubeletKey(), x509.Certificate{
			Subject:     pkix.Name{CommonName: APIServerKubeletClient},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	}
	for _, l := range leaves {
		if exists(l.cert) && exists(l.key) {
			continue
		}
		der, key, err := ca.Issue(l.tmpl, now, 5*365*24*time.Hour)
		if err != nil {
			return err
		}
		if err := pki.WritePair(l.cert, l.key, der, key); err != nil {
			return err
		}
	}
	return p.ensureServiceAccountKey()
}

// ensureServiceAccountKey creates the RSA key kube-apiserver signs service-account tokens with.
func (p pkiFiles) ensureServiceAccountKey() error {
	if exists(p.saSigningKey()) && exists(p.saVerifyingKey()) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encode service-account public key: %w", err)
	}
	priv, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(p.saVerifyingKey(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil { //nolint:gosec // a public key
		return err
	}
	return fsutil.WriteFileAtomic(p.saSigningKey(), priv, 0o600)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
