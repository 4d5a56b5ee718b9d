// Package pki creates the local cloud's certificate authority and HTTPS serving certificate once,
// in the data directory, and loads them on every later start so clients keep trusting the same CA.
package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/pki"
)

// File names inside the data directory.
const (
	CAFile      = "ca.pem"
	caKeyFile   = "ca-key.pem"
	ServingFile = "serving.pem" // certificate followed by its key
)

// PKI is the cloud's CA and the serving certificate it signed.
type PKI struct {
	CAFile  string         // path of the CA bundle clients trust (SSL_CERT_FILE)
	CAPEM   []byte         // the same bundle
	Pool    *x509.CertPool // holds only the CA
	Serving tls.Certificate
	CA      *pki.CA // issues the proxy's leaves for Azure's public names
}

// Ensure loads the CA and serving certificate from dir, creating whatever is missing. The serving
// certificate is valid for 127.0.0.1, ::1 and localhost, so any port on them works.
func Ensure(dir string, now time.Time) (*PKI, error) {
	caPath := filepath.Join(dir, CAFile)
	ca, err := pki.LoadOrCreateCA(caPath, filepath.Join(dir, caKeyFile),
		pkix.Name{CommonName: "Cerulean local cloud CA", Organization: []string{"Cerulean"}}, now)
	if err != nil {
		return nil, err
	}
	servingPath := filepath.Join(dir, ServingFile)
	serving, err := tls.LoadX509KeyPair(servingPath, servingPath)
	if errors.Is(err, os.ErrNotExist) {
		serving, err = createServing(servingPath, ca, now)
	}
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &PKI{CAFile: caPath, CAPEM: ca.PEM(), Pool: pool, Serving: serving, CA: ca}, nil
}

// TLSConfig is the server side configuration.
func (p *PKI) TLSConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Serving}, MinVersion: tls.VersionTLS12}
}

func createServing(path string, ca *pki.CA, now time.Time) (tls.Certificate, error) {
	der, key, err := ca.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost", Organization: []string{"Cerulean"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}, now, 2*365*24*time.Hour)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	bundle := append(pki.EncodeCert(der), keyPEM...)
	if err := fsutil.WriteFileAtomic(path, bundle, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(bundle, bundle)
}

// SelfSigned makes an RSA key and a self-signed certificate for it, as `az ad sp create-for-rbac
// --create-cert` does; it returns the certificate and the PEM bundle (certificate, then key).
func SelfSigned(commonName string, now time.Time) (*x509.Certificate, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: pki.Serial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return cert, append(pki.EncodeCert(der), keyPEM...), nil
}

// Pool returns the system roots (which honour SSL_CERT_FILE and SSL_CERT_DIR) plus extra PEM CAs.
func Pool(extra ...[]byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for i, p := range extra {
		if !pool.AppendCertsFromPEM(p) {
			return nil, fmt.Errorf("trusted CA %d: no PEM certificate found", i+1)
		}
	}
	return pool, nil
}
