package pki_test

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/pki"
)

func TestCAIsCreatedOnceAndSignsVerifiableLeaves(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	now := time.Now()
	ca, err := pki.LoadOrCreateCA(certPath, keyPath, pkix.Name{CommonName: "test CA"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	again, err := pki.LoadOrCreateCA(certPath, keyPath, pkix.Name{CommonName: "ignored"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.PEM(), ca.PEM()) {
		t.Fatal("a second call made a new CA instead of loading the one on disk")
	}

	der, _, err := again.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "leaf"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("leaf does not verify against the CA: %v", err)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("leaf: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now.Add(2 * time.Hour)}); err == nil {
		t.Error("leaf still valid past validFor")
	}
}

// A damaged CA is reported, never silently replaced: clients trust the one on disk.
func TestDamagedCAIsAnError(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if _, err := pki.LoadOrCreateCA(certPath, keyPath, pkix.Name{CommonName: "test CA"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadOrCreateCA(certPath, keyPath, pkix.Name{CommonName: "test CA"}, time.Now()); err == nil {
		t.Fatal("a damaged CA certificate was accepted or replaced")
	}
	b, _ := os.ReadFile(certPath)
	if string(b) != "not a certificate" {
		t.Error("the damaged CA file was overwritten")
	}
}
