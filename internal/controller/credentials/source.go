package credentials

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cerulean/cerulean/internal/azure"
)

// The keys of a credential secret (and of the manager's environment), as Azure Service Operator
// v2 names them.
const (
	KeySubscriptionID            = "AZURE_SUBSCRIPTION_ID"
	KeyTenantID                  = "AZURE_TENANT_ID"
	KeyClientID                  = "AZURE_CLIENT_ID"
	KeyClientSecret              = "AZURE_CLIENT_SECRET" //nolint:gosec // a key's name
	KeyClientCertificate         = "AZURE_CLIENT_CERTIFICATE"
	KeyClientCertificatePassword = "AZURE_CLIENT_CERTIFICATE_PASSWORD" //nolint:gosec // a key's name
	KeyUseWorkloadIdentity       = "USE_WORKLOAD_IDENTITY_AUTH"
	// KeyFederatedTokenFile is read from the manager's environment only (a projected token).
	KeyFederatedTokenFile = "AZURE_FEDERATED_TOKEN_FILE"
	// KeyClientCertificatePath is the manager's environment only: a file holding the certificate.
	KeyClientCertificatePath = "AZURE_CLIENT_CERTIFICATE_PATH"
)

// Kind is how a source authenticates.
type Kind string

// The kinds of credential.
const (
	KindSecret           Kind = "ClientSecret"
	KindCertificate      Kind = "ClientCertificate"
	KindWorkloadIdentity Kind = "WorkloadIdentity"
)

// Source is the material of one credential: a subscription, a tenant, an application, and
// exactly one of a client secret, a client certificate (PEM or PKCS#12, with its key) or
// workload identity (the manager's own service-account token, exchanged at Entra ID).
type Source struct {
	SubscriptionID            string
	TenantID                  string
	ClientID                  string
	ClientSecret              string
	ClientCertificate         []byte
	ClientCertificatePassword string
	WorkloadIdentity          bool
	// FederatedTokenFile is the projected token workload identity reads; empty means the
	// resolver's Settings (TokenSource, then its FederatedTokenFile).
	FederatedTokenFile string
}

// Kind is how the source authenticates; Validate has checked there is exactly one.
func (s Source) Kind() Kind {
	switch {
	case s.ClientSecret != "":
		return KindSecret
	case len(s.ClientCertificate) > 0:
		return KindCertificate
	}
	return KindWorkloadIdentity
}

// Validate checks that the source names a subscription, tenant and client and exactly one way
// to authenticate. Its errors wrap ErrInvalidCredential and name keys, never values.
func (s Source) Validate() error {
	var missing []string
	for _, k := range []struct{ key, v string }{{KeySubscriptionID, s.SubscriptionID}, {KeyTenantID, s.TenantID}, {KeyClientID, s.ClientID}} {
		if strings.TrimSpace(k.v) == "" {
			missing = append(missing, k.key)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrInvalidCredential, strings.Join(missing, ", "))
	}
	n := 0
	for _, set := range []bool{s.ClientSecret != "", len(s.ClientCertificate) > 0, s.WorkloadIdentity} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return fmt.Errorf("%w: one of %s, %s or %s=true is required", ErrInvalidCredential, KeyClientSecret, KeyClientCertificate, KeyUseWorkloadIdentity)
	case n > 1:
		return fmt.Errorf("%w: only one of %s, %s and %s=true may be set", ErrInvalidCredential, KeyClientSecret, KeyClientCertificate, KeyUseWorkloadIdentity)
	case s.ClientCertificatePassword != "" && len(s.ClientCertificate) == 0:
		return fmt.Errorf("%w: %s without %s", ErrInvalidCredential, KeyClientCertificatePassword, KeyClientCertificate)
	}
	return nil
}

// fingerprint identifies the material, so that a rotated secret gets a new cached credential.
// Only its hash is kept.
func (s Source) fingerprint() [sha256.Size]byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(s.SubscriptionID), []byte(s.TenantID), []byte(s.ClientID), []byte(s.ClientSecret),
		s.ClientCertificate, []byte(s.ClientCertificatePassword), []byte(fmt.Sprint(s.WorkloadIdentity)), []byte(s.FederatedTokenFile)} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// SourceFromData reads a credential secret's data and validates it.
func SourceFromData(data map[string][]byte) (Source, error) {
	get := func(k string) string { return strings.TrimSpace(string(data[k])) }
	s := Source{
		SubscriptionID:            get(KeySubscriptionID),
		TenantID:                  get(KeyTenantID),
		ClientID:                  get(KeyClientID),
		ClientSecret:              string(data[KeyClientSecret]),
		ClientCertificate:         data[KeyClientCertificate],
		ClientCertificatePassword: string(data[KeyClientCertificatePassword]),
	}
	wi, err := parseBool(get(KeyUseWorkloadIdentity))
	if err != nil {
		return Source{}, err
	}
	s.WorkloadIdentity = wi
	return s, s.Validate()
}

// SourceFromEnv reads the manager's global credential from its environment (os.Getenv in
// production): the keys of a credential secret, where AZURE_CLIENT_CERTIFICATE holds the
// certificate itself or AZURE_CLIENT_CERTIFICATE_PATH names a file, and workload identity reads
// AZURE_FEDERATED_TOKEN_FILE. It returns nil, nil when no AZURE_CLIENT_ID is set: no global
// credential, so every namespace needs its own.
func SourceFromEnv(getenv func(string) string) (*Source, error) {
	if getenv(KeyClientID) == "" {
		return nil, nil
	}
	s := Source{
		SubscriptionID:            getenv(KeySubscriptionID),
		TenantID:                  getenv(KeyTenantID),
		ClientID:                  getenv(KeyClientID),
		ClientSecret:              getenv(KeyClientSecret),
		ClientCertificatePassword: getenv(KeyClientCertificatePassword),
		FederatedTokenFile:        getenv(KeyFederatedTokenFile),
	}
	if v := getenv(KeyClientCertificate); v != "" {
		s.ClientCertificate = []byte(v)
	} else if p := getenv(KeyClientCertificatePath); p != "" {
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", KeyClientCertificatePath, err)
		}
		s.ClientCertificate = pem
	}
	wi, err := parseBool(getenv(KeyUseWorkloadIdentity))
	if err != nil {
		return nil, err
	}
	s.WorkloadIdentity = wi
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("global credential: %w", err)
	}
	return &s, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s must be true or false", ErrInvalidCredential, KeyUseWorkloadIdentity)
}

var errNoToken = errors.New("no service-account token for workload identity: set AZURE_FEDERATED_TOKEN_FILE or a token source")

// SettingsFromConfig are the resolver's settings for a manager configured through internal/azure
// (the cloud and the manager's own service principal in one azure.Config): the cloud from cfg,
// and the global credential from its client secret or certificate file; no global credential
// when cfg has no client id.
func SettingsFromConfig(cfg azure.Config) (Settings, error) {
	s := Settings{Azure: cfg}
	if cfg.ClientID == "" {
		return s, nil
	}
	src := Source{SubscriptionID: cfg.SubscriptionID, TenantID: cfg.TenantID, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret}
	if src.ClientSecret == "" && cfg.ClientCertificatePath != "" {
		pem, err := os.ReadFile(cfg.ClientCertificatePath)
		if err != nil {
			return Settings{}, fmt.Errorf("read client certificate: %w", err)
		}
		src.ClientCertificate = pem
	}
	if err := src.Validate(); err != nil {
		return Settings{}, fmt.Errorf("global credential: %w", err)
	}
	s.Global = &src
	return s, nil
}
