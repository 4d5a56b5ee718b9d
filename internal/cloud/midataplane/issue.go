// Package midataplane is the local cloud's managed-identity data plane: the API through which
// Azure hands a resource provider the credentials of the managed identities of a resource it
// hosts (a hosted control plane's components), as a client certificate registered on each
// identity's principal. It serves the request and response shapes of Azure's "Managed Identity
// Data Plane API" 2024-01-01 (POST the x-ms-identity-url with {"identityIds": [...]}, answer a
// CredentialsObject whose explicit_identities are UserAssignedIdentityCredentials).
package midataplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // x5t, as Entra ID keys certificates
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/pki"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// DefaultValidity is how long issued credentials are valid: Azure's managed-identity data
// plane issues certificates for 90 days. renew_after is at half the validity,
// cannot_renew_after at nine tenths.
const DefaultValidity = 90 * 24 * time.Hour

// Issuer issues managed identities' credentials.
type Issuer struct {
	Directory     *entra.Directory
	CA            *pki.CA // signs the certificates
	AuthorityHost string  // the credentials' authentication_endpoint: where their holder reaches Entra ID
	Clock         func() time.Time
}

// Issue creates a new RSA key and a certificate for it signed by the cloud's CA, registers the
// certificate on the managed identity's principal (dropping its certificates that have
// expired, so renewals do not pile up), and returns the credentials file: a PEM bundle of
// certificate, CA and key, base64-encoded in client_secret. The result holds a private key:
// never log it.
func (i *Issuer) Issue(ctx context.Context, p entra.Principal, validity time.Duration) (hcpcredentials.File, error) {
	if p.Kind != entra.KindManagedIdentity {
		return hcpcredentials.File{}, fmt.Errorf("%w: credentials are issued to managed identities only", entra.ErrInvalid)
	}
	if validity <= 0 {
		validity = DefaultValidity
	}
	now := i.Clock().UTC().Truncate(time.Second)
	key, err := rsa.GenerateKey(rand.Reader, 2048) // azidentity's certificate credential takes RSA keys only
	if err != nil {
		return hcpcredentials.File{}, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: pki.Serial(), Subject: pkix.Name{CommonName: p.ClientID},
		NotBefore: now, NotAfter: now.Add(validity), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.CA.Cert, &key.PublicKey, i.CA.Key)
	if err != nil {
		return hcpcredentials.File{}, fmt.Errorf("sign identity certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return hcpcredentials.File{}, fmt.Errorf("parse identity certificate: %w", err)
	}
	s1 := sha1.Sum(der) //nolint:gosec // x5t
	s256 := sha256.Sum256(der)
	cert := entra.Certificate{KeyID: uuid.NewString(), SHA1: s1[:], SHA256: s256[:], DER: der, Expires: leaf.NotAfter.UTC()}
	if _, err := i.Directory.UpdatePrincipal(ctx, p.TenantID, p.ClientID, func(pr *entra.Principal) error {
		kept := pr.Certificates[:0]
		for _, c := range pr.Certificates {
			if c.Expires.IsZero() || c.Expires.After(now) {
				kept = append(kept, c)
			}
		}
		pr.Certificates = append(kept, cert)
		return nil
	}); err != nil {
		return hcpcredentials.File{}, fmt.Errorf("register identity certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return hcpcredentials.File{}, fmt.Errorf("encode key: %w", err)
	}
	bundle := append(pki.EncodeCert(der), i.CA.PEM()...)
	bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	return hcpcredentials.File{
		AuthenticationEndpoint: i.AuthorityHost,
		ClientID:               p.ClientID,
		ClientSecret:           base64.StdEncoding.EncodeToString(bundle),
		TenantID:               p.TenantID,
		ObjectID:               p.ObjectID,
		NotBefore:              now,
		NotAfter:               now.Add(validity),
		RenewAfter:             now.Add(validity / 2),
		CannotRenewAfter:       now.Add(validity * 9 / 10),
	}, nil
}
