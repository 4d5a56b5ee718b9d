package azure

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// ErrBadCertificate reports client certificate bytes that are not a certificate with its
// private key (PEM, or PKCS#12 with its password).
var ErrBadCertificate = errors.New("not a certificate with its private key")

// ClientCredential is what an application authenticates with to Entra ID: a client secret, a
// certificate (PEM or PKCS#12 bytes with their password, or already parsed), or an assertion
// such as a projected service-account token (workload identity federation). The first one set
// is used.
type ClientCredential struct {
	TenantID            string
	ClientID            string
	Secret              string
	Certificate         []byte
	CertificatePassword string
	// Certificates and Key: a certificate the caller has parsed already.
	Certificates []*x509.Certificate
	Key          crypto.PrivateKey
	Assertion    func(context.Context) (string, error)
	// SendCertificateChain sends the x5c header (subject name/issuer authentication).
	SendCertificateChain       bool
	AdditionallyAllowedTenants []string
}

// NewCredential is the one place service-principal and federated credentials are built: the
// manager, the node agent, the CSI provider, the doctor and the control-plane credentials all
// come here. opts carries the authority and transport (usually Config.ClientOptions, computed
// once so that credentials share a transport). Outside the public cloud instance discovery is
// off: it would ask login.microsoftonline.com about a host it does not know. Each credential
// keeps its own token cache. Errors never carry the secret material.
func NewCredential(cc ClientCredential, opts azcore.ClientOptions) (azcore.TokenCredential, error) {
	if cc.TenantID == "" || cc.ClientID == "" {
		return nil, fmt.Errorf("%w: tenant and client id are required", ErrIncomplete)
	}
	noDiscovery := !IsPublicAuthority(opts.Cloud.ActiveDirectoryAuthorityHost)
	switch {
	case cc.Secret != "":
		return azidentity.NewClientSecretCredential(cc.TenantID, cc.ClientID, cc.Secret,
			&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: noDiscovery,
				AdditionallyAllowedTenants: cc.AdditionallyAllowedTenants})
	case len(cc.Certificate) > 0 || len(cc.Certificates) > 0:
		certs, key := cc.Certificates, cc.Key
		if len(certs) == 0 {
			var password []byte
			if cc.CertificatePassword != "" {
				password = []byte(cc.CertificatePassword)
			}
			var err error
			if certs, key, err = azidentity.ParseCertificates(cc.Certificate, password); err != nil {
				return nil, fmt.Errorf("parse client certificate: %w: %w", ErrBadCertificate, err)
			}
		}
		return azidentity.NewClientCertificateCredential(cc.TenantID, cc.ClientID, certs, key,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: noDiscovery,
				SendCertificateChain: cc.SendCertificateChain, AdditionallyAllowedTenants: cc.AdditionallyAllowedTenants})
	case cc.Assertion != nil:
		return azidentity.NewClientAssertionCredential(cc.TenantID, cc.ClientID, cc.Assertion,
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: noDiscovery,
				AdditionallyAllowedTenants: cc.AdditionallyAllowedTenants})
	}
	return nil, fmt.Errorf("%w: a client secret, certificate or assertion is required", ErrIncomplete)
}

// IsPublicAuthority reports whether an authority host (empty: the SDK's default) is Azure's
// public Entra ID, login.microsoftonline.com.
func IsPublicAuthority(host string) bool {
	if host == "" {
		return true
	}
	u, err := url.Parse(host)
	return err == nil && strings.EqualFold(u.Hostname(), "login.microsoftonline.com")
}
