// Package credentials resolves the Azure credential a resource is reconciled with.
//
// TEMPORARY: this is the global-only subset of the contract in the manager helpers' notes
// (per-namespace `aso-credential` and per-resource `credential-from` secrets come with the full
// package, which replaces this file on merge). The exported names and signatures are the
// contract's.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/azure"
)

// Errors the reconciler maps to condition reasons.
var (
	ErrSecretNotFound    = errors.New("credential secret not found")
	ErrInvalidCredential = errors.New("invalid credential")
)

// Settings are the manager's credential settings.
type Settings struct {
	// Global is the manager's own credential and cloud.
	Global azure.Config
}

// Resolver finds the credential for a resource.
type Resolver struct {
	settings Settings
	once     sync.Once
	cached   azcore.TokenCredential
	err      error
}

// NewResolver returns a resolver reading secrets through r.
func NewResolver(_ client.Reader, s Settings) *Resolver { return &Resolver{settings: s} }

// Credential is a resolved credential; it never holds secret values in its exported fields.
type Credential struct {
	Source         string
	SubscriptionID string
	TenantID       string
	ClientID       string

	cfg      azure.Config
	resolver *Resolver
}

// For returns obj's credential.
func (r *Resolver) For(_ context.Context, _ client.Object) (*Credential, error) {
	g := r.settings.Global
	if g.TenantID == "" || g.ClientID == "" || g.SubscriptionID == "" {
		return nil, fmt.Errorf("%w: global credential needs AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_SUBSCRIPTION_ID", ErrInvalidCredential)
	}
	return &Credential{Source: "global", SubscriptionID: g.SubscriptionID, TenantID: g.TenantID, ClientID: g.ClientID, cfg: g, resolver: r}, nil
}

// Fresh is a new credential: its first use fetches a new token.
func (c *Credential) Fresh(_ context.Context) (azcore.TokenCredential, error) {
	cred, err := c.cfg.Credential()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	return cred, nil
}

// Cached is one shared credential per source, for reads.
func (c *Credential) Cached() azcore.TokenCredential {
	r := c.resolver
	r.once.Do(func() { r.cached, r.err = c.cfg.Credential() })
	if r.err != nil {
		return failing{r.err}
	}
	return r.cached
}

type failing struct{ err error }

func (f failing) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, f.err
}
