package pki

import (
	"bytes"
	"crypto/x509"
	"testing"
	"time"
)

func TestEnsureCreatesOnceAndCoversLoopback(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	first, err := Ensure(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Ensure(dir, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CAPEM, again.CAPEM) || !bytes.Equal(first.Serving.Certificate[0], again.Serving.Certificate[0]) {
		t.Fatal("a second Ensure replaced the CA or the serving certificate")
	}
	leaf, err := x509.ParseCertificate(first.Serving.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: first.Pool, CurrentTime: now}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	if _, err := Pool([]byte("not pem")); err == nil {
		t.Error("Pool accepted a file without certificates")
	}
}
