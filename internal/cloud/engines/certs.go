package engines

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/pki"
)

// writeServing issues a serving certificate for host (and its address and 127.0.0.1) from the cloud's CA into
// dir/server.crt and dir/server.key, key readable only by its owner. A new one every start: the
// CA is the cloud's, the leaf is the engine's, and nothing pins it.
func (s *Supervisor) writeServing(dir, host string, addr netip.Addr) (certFile, keyFile string, err error) {
	if s.o.CA == nil {
		return "", "", fmt.Errorf("issue certificate for %s: no CA", host)
	}
	der, key, err := s.o.CA.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: host, Organization: []string{"Cerulean"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{host},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IP(addr.AsSlice())},
	}, s.o.Now(), 365*24*time.Hour)
	if err != nil {
		return "", "", fmt.Errorf("issue certificate for %s: %w", host, err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, append(pki.EncodeCert(der), s.o.CA.PEM()...), 0o644); err != nil { //nolint:gosec // a certificate: public, read by the engine user
		return "", "", err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
