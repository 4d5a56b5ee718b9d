// Package pki creates the local cloud's certificate authority and HTTPS serving certificate once,
// in the data directory, and loads them on every later start so clients keep trusting the same CA.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
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
}

// Ensure loads the CA and serving certificate from dir, creating whatever is missing. The serving
// certificate is valid for 127.0.0.1, ::1 and localhost, so any port on them works.
func Ensure(dir string, now time.Time) (*PKI, error) {
	caPath := filepath.Join(dir, CAFile)
	caCert, caKey, err := loadPair(caPath, filepath.Join(dir, caKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		caCert, caKey, err = createCA(dir, now)
	}
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	servingPath := filepath.Join(dir, ServingFile)
	serving, err := tls.LoadX509KeyPair(servingPath, servingPath)
	if errors.Is(err, os.ErrNotExist) {
		serving, err = createServing(servingPath, caCert, caKey, now)
	}
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &PKI{CAFile: caPath, CAPEM: caPEM, Pool: pool, Serving: serving}, nil
}

// TLSConfig is the server side configuration.
func (p *PKI) TLSConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Serving}, MinVersion: tls.VersionTLS12}
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("CA key cannot sign")
	}
	return cert, signer, nil
}

func createCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Cerulean local cloud CA", Organization: []string{"Cerulean"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	// The key goes first: a CA file without its key would be reloaded as a CA nobody can extend.
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, CAFile), EncodeCert(der), 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func createServing(path string, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"Cerulean"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	bundle := append(EncodeCert(der), keyPEM...)
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
		SerialNumber: serial(),
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
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return cert, append(EncodeCert(der), keyPEM...), nil
}

// EncodeCert PEM-encodes a DER certificate.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeKey PEM-encodes a private key as PKCS #8.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
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

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}
