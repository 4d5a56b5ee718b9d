// Package pki issues the X.509 certificates of Cerulean's local services: a certificate
// authority kept on disk, and the leaves it signs.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"

	"github.com/cerulean/cerulean/internal/fsutil"
)

// CA is a certificate authority and its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadOrCreateCA loads the CA at certPath and keyPath, or creates one valid for ten years when
// either file is missing. The key is written first: a certificate on disk implies its key is.
func LoadOrCreateCA(certPath, keyPath string, subject pkix.Name, now time.Time) (*CA, error) {
	cert, key, err := LoadPair(certPath, keyPath)
	if err == nil {
		return &CA{Cert: cert, Key: key}, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	ca, err := NewCA(subject, now, 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := WritePair(certPath, keyPath, ca.Cert.Raw, ca.Key); err != nil {
		return nil, err
	}
	return ca, nil
}

// NewCA creates a CA in memory, valid from an hour before now (clock skew) for validFor.
func NewCA(subject pkix.Name, now time.Time, validFor time.Duration) (*CA, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          Serial(),
		Subject:               subject,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: k}, nil
}

// ParseCA reads a CA from PEM: its certificate and its key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("parse CA: not a CA certificate with a signing key")
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// PEM is the CA certificate, PEM-encoded: what clients trust.
func (ca *CA) PEM() []byte { return EncodeCert(ca.Cert.Raw) }

// Issue signs a leaf for a new P-256 key. tmpl gives the subject, names and extended key usage;
// Issue sets the serial, the validity (an hour back, for clock skew, to validFor ahead) and the
// key usage.
func (ca *CA) Issue(tmpl x509.Certificate, now time.Time, validFor time.Duration) ([]byte, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl.SerialNumber = Serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(validFor)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	return der, key, nil
}

// LoadPair reads a PEM certificate and its key (PKCS #8, PKCS #1 or SEC 1). A missing file is
// reported as os.ErrNotExist.
func LoadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", certPath, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("key %s cannot sign", keyPath)
	}
	return cert, signer, nil
}

// WritePair writes a certificate (0644) and its key (0600), key first, each atomically.
func WritePair(certPath, keyPath string, der []byte, key crypto.Signer) error {
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(certPath, EncodeCert(der), 0o644) //nolint:gosec // a certificate is public
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

// Serial is a random 127-bit certificate serial number.
func Serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
