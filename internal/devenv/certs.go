package devenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/fsutil"
)

// pkiFiles names every certificate and key the control plane uses, under DIR/pki.
type pkiFiles struct {
	dir string
}

func (p pkiFiles) path(name string) string { return filepath.Join(p.dir, name) }

func (p pkiFiles) caCert() string         { return p.path("ca.crt") }
func (p pkiFiles) caKey() string          { return p.path("ca.key") }
func (p pkiFiles) servingCert() string    { return p.path("serving.crt") }
func (p pkiFiles) servingKey() string     { return p.path("serving.key") }
func (p pkiFiles) adminCert() string      { return p.path("admin.crt") }
func (p pkiFiles) adminKey() string       { return p.path("admin.key") }
func (p pkiFiles) kcmCert() string        { return p.path("kube-controller-manager.crt") }
func (p pkiFiles) kcmKey() string         { return p.path("kube-controller-manager.key") }
func (p pkiFiles) saSigningKey() string   { return p.path("service-account.key") }
func (p pkiFiles) saVerifyingKey() string { return p.path("service-account.pub") }

// ensure creates whatever is missing; existing files are kept so a restart keeps its identity.
func (p pkiFiles) ensure(now time.Time) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	ca, caKey, err := p.ensureCA(now)
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
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
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
	}
	for _, l := range leaves {
		if exists(l.cert) && exists(l.key) {
			continue
		}
		if err := writeLeaf(l.cert, l.key, l.tmpl, ca, caKey, now); err != nil {
			return err
		}
	}
	return p.ensureServiceAccountKey()
}

func (p pkiFiles) ensureCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if !exists(p.caCert()) || !exists(p.caKey()) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generate CA key: %w", err)
		}
		tmpl := x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "cerulean-local-ca"},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, nil, fmt.Errorf("create CA certificate: %w", err)
		}
		if err := writeKeyPair(p.caCert(), p.caKey(), der, key); err != nil {
			return nil, nil, err
		}
	}
	return loadKeyPair(p.caCert(), p.caKey())
}

func (p pkiFiles) ensureServiceAccountKey() error {
	if exists(p.saSigningKey()) && exists(p.saVerifyingKey()) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encode service-account public key: %w", err)
	}
	if err := writePEM(p.saVerifyingKey(), "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}
	return writePEM(p.saSigningKey(), "PRIVATE KEY", priv, 0o600)
}

func writeLeaf(certPath, keyPath string, tmpl x509.Certificate, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key for %s: %w", filepath.Base(certPath), err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.AddDate(5, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign %s: %w", filepath.Base(certPath), err)
	}
	return writeKeyPair(certPath, keyPath, der, key)
}

func writeKeyPair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(keyPath), err)
	}
	// Key first: a certificate on disk implies its key is there too.
	if err := writePEM(keyPath, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der, 0o644)
}

func loadKeyPair(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certDER, err := readPEM(certPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", certPath, err)
	}
	keyDER, err := readPEM(keyPath)
	if err != nil {
		return nil, nil, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", keyPath, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("parse %s: not an ECDSA key", keyPath)
	}
	return cert, key, nil
}

func readPEM(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("read %s: no PEM block", path)
	}
	return block.Bytes, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return fsutil.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
