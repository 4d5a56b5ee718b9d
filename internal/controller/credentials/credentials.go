// Package credentials resolves the Azure credential a resource is reconciled with, as Azure
// Service Operator v2 does: the secret named by the resource's
// `serviceoperator.azure.com/credential-from` annotation (in the resource's namespace), else the
// namespace's `aso-credential` secret, else the manager's global credential. A credential
// authenticates with a client secret, a client certificate or workload identity (the manager's
// own service-account token, exchanged at Entra ID).
//
// Writes use Fresh: a new credential whose first use requests a new token, so that every
// provisioning and deprovisioning operation is authorised by a token issued for it. Reads use
// Cached: one credential per source, reusing its token until it nears expiry. Secrets are read
// on every For (through the manager's cache), so a rotated secret is used at once.
package credentials

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/azure"
)

const (
	// AnnotationCredentialFrom names, on a resource, the secret in its namespace holding its credential.
	AnnotationCredentialFrom = "serviceoperator.azure.com/credential-from"
	// NamespaceSecretName is the secret that holds a namespace's credential.
	NamespaceSecretName = "aso-credential" //nolint:gosec // a secret's name, not a credential
	// SourceGlobal is Credential.Source for the manager's own credential.
	SourceGlobal = "global"
)

var (
	// ErrSecretNotFound is returned when the credential secret a resource needs does not exist (ASO's reason
	// SecretNotFound; retried, since the secret may be created later).
	ErrSecretNotFound = errors.New("credential secret not found")
	// ErrInvalidCredential is returned when the credential's secret or settings are unusable: missing keys, more
	// than one way to authenticate, an unparsable certificate (ASO's
	// ReconciliationFailedPermanently until the secret changes).
	ErrInvalidCredential = errors.New("invalid credential")
)

// Settings are the manager's: where Azure is and its own (global) credential.
type Settings struct {
	// Azure locates the cloud: AuthorityHost, ResourceManagerEndpoint/Audience and CAFile. Its
	// credential fields are ignored (Global is the manager's credential).
	Azure azure.Config
	// Global is the manager's own credential; nil means none, so that every resource needs a
	// namespace or per-resource secret.
	Global *Source
	// TokenSource returns the manager's service-account token for workload identity (audience
	// api://AzureADTokenExchange), as a kubelet projects it; under `cerulean-local up` it calls the
	// TokenRequest API. Used when a source has no FederatedTokenFile of its own; nil means
	// FederatedTokenFile below.
	TokenSource func(context.Context) (string, error)
	// FederatedTokenFile is the projected token file (AZURE_FEDERATED_TOKEN_FILE) used when
	// TokenSource is nil.
	FederatedTokenFile string
}

// Resolver finds a resource's credential. It is safe for concurrent use.
type Resolver struct {
	reader   client.Reader
	settings Settings
	opts     azcore.ClientOptions
	optsErr  error

	mu     sync.Mutex
	cached map[string]cachedCred // by Credential.Source
}

type cachedCred struct {
	fingerprint [sha256.Size]byte
	cred        azcore.TokenCredential
}

// NewResolver reads secrets through r (the manager's cache) and builds credentials for the cloud
// of s. The SDK client options (the CA bundle) are built once, here; an error in them is
// returned by every For.
func NewResolver(r client.Reader, s Settings) *Resolver {
	opts, err := s.Azure.ClientOptions()
	return &Resolver{reader: r, settings: s, opts: opts, optsErr: err, cached: map[string]cachedCred{}}
}

// Credential is a resolved credential. Its exported fields are safe to show in status and logs.
type Credential struct {
	// Source is where it came from: "global", "namespace NS/aso-credential" or "secret NS/NAME".
	Source         string
	SubscriptionID string
	TenantID       string
	ClientID       string
	Kind           Kind

	// secret is the Secret it was read from (namespace, name); empty for the global one.
	secret types.NamespacedName

	src    Source
	cached azcore.TokenCredential
	r      *Resolver
}

// For resolves obj's credential: its credential-from secret, else its namespace's
// aso-credential secret, else the global one. Errors wrap ErrSecretNotFound or
// ErrInvalidCredential where those apply and never contain secret values.
func (r *Resolver) For(ctx context.Context, obj client.Object) (*Credential, error) {
	if r.optsErr != nil {
		return nil, fmt.Errorf("build Azure client options: %w", r.optsErr)
	}
	ns := obj.GetNamespace()
	if name, ok := obj.GetAnnotations()[AnnotationCredentialFrom]; ok {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%w: annotation %s is empty", ErrInvalidCredential, AnnotationCredentialFrom)
		}
		src, err := r.readSecret(ctx, ns, name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%w: secret %s/%s named by %s", ErrSecretNotFound, ns, name, AnnotationCredentialFrom)
			}
			return nil, err
		}
		return r.fromSecret("secret "+ns+"/"+name, types.NamespacedName{Namespace: ns, Name: name}, src)
	}
	if ns != "" {
		src, err := r.readSecret(ctx, ns, NamespaceSecretName)
		switch {
		case err == nil:
			return r.fromSecret("namespace "+ns+"/"+NamespaceSecretName, types.NamespacedName{Namespace: ns, Name: NamespaceSecretName}, src)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	if r.settings.Global == nil {
		return nil, fmt.Errorf("%w: no secret %s/%s and no global credential", ErrSecretNotFound, ns, NamespaceSecretName)
	}
	if err := r.settings.Global.Validate(); err != nil {
		return nil, fmt.Errorf("global credential: %w", err)
	}
	return r.credential(SourceGlobal, *r.settings.Global)
}

// readSecret reads and validates a credential secret; a NotFound error is returned unwrapped
// for the caller to tell apart.
func (r *Resolver) readSecret(ctx context.Context, ns, name string) (Source, error) {
	var s corev1.Secret
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return Source{}, err
		}
		return Source{}, fmt.Errorf("get credential secret %s/%s: %w", ns, name, err)
	}
	src, err := SourceFromData(s.Data)
	if err != nil {
		return Source{}, fmt.Errorf("credential secret %s/%s: %w", ns, name, err)
	}
	return src, nil
}

func (r *Resolver) fromSecret(source string, secret types.NamespacedName, src Source) (*Credential, error) {
	c, err := r.credential(source, src)
	if err != nil {
		return nil, err
	}
	c.secret = secret
	return c, nil
}

func (r *Resolver) credential(source string, src Source) (*Credential, error) {
	cached, err := r.cachedFor(source, src, src.fingerprint())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &Credential{Source: source, SubscriptionID: src.SubscriptionID, TenantID: src.TenantID, ClientID: src.ClientID,
		Kind: src.Kind(), src: src, cached: cached, r: r}, nil
}

// Fresh is a new credential: its first GetToken requests a new token from Entra ID (no cache
// shared with any other credential). Use one per provisioning or deprovisioning operation.
func (c *Credential) Fresh(context.Context) (azcore.TokenCredential, error) {
	return c.r.build(c.src)
}

// Cached is the one credential of this source (and of this version of its secret), shared by
// every resource using it and reusing tokens until they near expiry: for reads. When the
// secret changes, the next For replaces it.
func (c *Credential) Cached() azcore.TokenCredential { return c.cached }

// cachedFor returns the shared credential of source for this material, building it when the
// material changed. Building it here makes For fail at once on an unusable secret.
func (r *Resolver) cachedFor(source string, src Source, fp [sha256.Size]byte) (azcore.TokenCredential, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.cached[source]; ok && e.fingerprint == fp {
		return e.cred, nil
	}
	cred, err := r.build(src)
	if err != nil {
		return nil, err
	}
	r.cached[source] = cachedCred{fingerprint: fp, cred: cred}
	return cred, nil
}

// build makes a new credential from src through internal/azure.
func (r *Resolver) build(src Source) (azcore.TokenCredential, error) {
	cc := azure.ClientCredential{TenantID: src.TenantID, ClientID: src.ClientID}
	switch src.Kind() {
	case KindSecret:
		cc.Secret = src.ClientSecret
	case KindCertificate:
		cc.Certificate, cc.CertificatePassword = src.ClientCertificate, src.ClientCertificatePassword
	case KindWorkloadIdentity:
		cc.Assertion = r.assertion(src)
	}
	cred, err := azure.NewCredential(cc, r.opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	return cred, nil
}

// assertion is the service-account token workload identity exchanges: the source's token file,
// else the settings' token source, else their token file. A file is read on every exchange, as
// the kubelet rotates it.
func (r *Resolver) assertion(src Source) func(context.Context) (string, error) {
	file := src.FederatedTokenFile
	if file == "" && r.settings.TokenSource != nil {
		return r.settings.TokenSource
	}
	if file == "" {
		file = r.settings.FederatedTokenFile
	}
	if file == "" {
		return func(context.Context) (string, error) { return "", errNoToken }
	}
	return azure.FileAssertion(file)
}
