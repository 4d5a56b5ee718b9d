// Package azure is how Cerulean's components reach an Azure: the public cloud or the local one.
// It turns the standard environment (AZURE_TENANT_ID, AZURE_CLIENT_*, AZURE_AUTHORITY_HOST,
// AZURE_RESOURCE_MANAGER_*, SSL_CERT_FILE) into credentials and SDK client options, and sets the
// options a non-public cloud needs (instance discovery off, Key Vault challenge verification off)
// so that no caller has to remember them.
package azure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
)

// Config says where Azure is and who the component is there.
type Config struct {
	TenantID       string
	SubscriptionID string
	// ClientID with ClientSecret, with ClientCertificatePath (PEM: certificate and key), or with
	// FederatedTokenFile: a token from another issuer that Entra ID trusts for the client
	// (workload identity federation: a pod's projected token, a CI system's OIDC token).
	ClientID              string
	ClientSecret          string
	ClientCertificatePath string
	FederatedTokenFile    string
	// AuthorityHost is Entra ID's address; empty means the public cloud.
	AuthorityHost string
	// ResourceManagerEndpoint and ResourceManagerAudience locate ARM; empty means the public cloud.
	ResourceManagerEndpoint string
	ResourceManagerAudience string
	// CAFile is a PEM bundle to trust besides the system roots: the local cloud's CA.
	CAFile string
}

// ErrIncomplete reports a configuration without what a credential needs.
var ErrIncomplete = errors.New("incomplete Azure configuration")

// ConfigFromEnv reads the standard variables through getenv (os.Getenv in production).
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{
		TenantID:                getenv("AZURE_TENANT_ID"),
		SubscriptionID:          getenv("AZURE_SUBSCRIPTION_ID"),
		ClientID:                getenv("AZURE_CLIENT_ID"),
		ClientSecret:            getenv("AZURE_CLIENT_SECRET"),
		ClientCertificatePath:   getenv("AZURE_CLIENT_CERTIFICATE_PATH"),
		FederatedTokenFile:      getenv("AZURE_FEDERATED_TOKEN_FILE"),
		AuthorityHost:           getenv("AZURE_AUTHORITY_HOST"),
		ResourceManagerEndpoint: getenv("AZURE_RESOURCE_MANAGER_ENDPOINT"),
		ResourceManagerAudience: getenv("AZURE_RESOURCE_MANAGER_AUDIENCE"),
		CAFile:                  getenv("SSL_CERT_FILE"),
	}
}

// IsPublic reports whether the configuration names Azure's public cloud (no authority, or
// Microsoft's own).
func (c Config) IsPublic() bool { return IsPublicAuthority(c.AuthorityHost) }

// ClientOptions are the options every SDK client of this cloud takes: its authority and ARM
// endpoint, and a transport that trusts CAFile. Go reads SSL_CERT_FILE once per process, so the
// CA is loaded here explicitly rather than left to the environment.
func (c Config) ClientOptions() (azcore.ClientOptions, error) {
	var opts azcore.ClientOptions
	if !c.IsPublic() {
		audience := c.ResourceManagerAudience
		if audience == "" {
			audience = cloud.AzurePublic.Services[cloud.ResourceManager].Audience
		}
		opts.Cloud = cloud.Configuration{
			ActiveDirectoryAuthorityHost: c.AuthorityHost,
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Audience: audience, Endpoint: c.ResourceManagerEndpoint},
			},
		}
	}
	if c.CAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return opts, fmt.Errorf("read CA bundle: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("read CA bundle %s: no PEM certificate", c.CAFile)
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		opts.Transport = &http.Client{Transport: transport}
	}
	return opts, nil
}

// Credential is the component's credential, in the order of the Azure SDK's environment
// credential: a client secret when one is set, else the certificate, else the federated token
// file, read again at each exchange (the kubelet and CI systems replace it before it expires).
// Outside the public cloud instance discovery is off: it would ask login.microsoftonline.com
// about a host it does not know.
func (c Config) Credential() (azcore.TokenCredential, error) {
	if c.TenantID == "" || c.ClientID == "" {
		return nil, fmt.Errorf("%w: AZURE_TENANT_ID and AZURE_CLIENT_ID are required", ErrIncomplete)
	}
	if c.ClientSecret == "" && c.ClientCertificatePath == "" && c.FederatedTokenFile == "" {
		return nil, fmt.Errorf("%w: AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PATH or AZURE_FEDERATED_TOKEN_FILE is required", ErrIncomplete)
	}
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	cc := ClientCredential{TenantID: c.TenantID, ClientID: c.ClientID, Secret: c.ClientSecret}
	switch {
	case c.ClientSecret != "":
	case c.ClientCertificatePath != "":
		pem, err := os.ReadFile(c.ClientCertificatePath)
		if err != nil {
			return nil, fmt.Errorf("read client certificate: %w", err)
		}
		cc.Certificate = pem
		cred, err := NewCredential(cc, opts)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s: %w", c.ClientCertificatePath, err)
		}
		return cred, nil
	default:
		cc.Assertion = FileAssertion(c.FederatedTokenFile)
	}
	return NewCredential(cc, opts)
}

// FileAssertion reads a federated token from path at each call.
func FileAssertion(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read the federated token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("the federated token file %s is empty", path)
		}
		return tok, nil
	}
}

// ARMOptions are ClientOptions for the arm* clients.
func (c Config) ARMOptions() (*arm.ClientOptions, error) {
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	return &arm.ClientOptions{ClientOptions: opts}, nil
}

// SecretsOptions are ClientOptions for azsecrets. Outside the public cloud the vault's host cannot
// end in the challenge resource's domain (a vault on 127.0.0.1), so the check is off.
func (c Config) SecretsOptions() (*azsecrets.ClientOptions, error) {
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	return &azsecrets.ClientOptions{ClientOptions: opts, DisableChallengeResourceVerification: !c.IsPublic()}, nil
}

// LocalIdentityPath is where the local cloud serves the managed-identity data plane (Azure's
// "Managed Identity Data Plane API"): its x-ms-identity-url is the cloud's address followed by
// this path.
const LocalIdentityPath = "/_cerulean/identity/credentials"

// IdentityURL is the managed-identity data plane's URL for this cloud: the local cloud's (from
// its ARM endpoint), or "" for Azure, where ARM hands a resource provider the URL of each of its
// resources (the x-ms-identity-url header) and nothing can be derived.
func (c Config) IdentityURL() string {
	if c.IsPublic() || c.ResourceManagerEndpoint == "" {
		return ""
	}
	return strings.TrimSuffix(c.ResourceManagerEndpoint, "/") + LocalIdentityPath
}
