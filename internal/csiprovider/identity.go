package csiprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sync/singleflight"

	"github.com/cerulean/cerulean/internal/azure"
)

// ErrAuthentication reports that the mount's identity could not get a Key Vault token.
var ErrAuthentication = errors.New("authenticate to Entra ID")

// tokenMargin is how long before its expiry a proven token stops being used.
const tokenMargin = 5 * time.Minute

// proof is the outcome of a mount's own token exchange: who the caller is (tenant and object id
// from the token Entra ID issued) and the token.
type proof struct {
	identity string // TENANT/OBJECTID
	token    azcore.AccessToken
}

// prover exchanges each distinct credential once per token lifetime. Its cache is keyed by a
// hash of everything the exchange used (the service-account token, the client secret, the pod,
// the identity selector), so a mount is served only under an identity its own inputs proved.
type prover struct {
	azure  azure.Config
	podURL string
	// managedIdentity, when set, builds VM managed identity credentials (Options.ManagedIdentity).
	managedIdentity func(userAssignedIdentityID string) (azcore.TokenCredential, error)
	now             func() time.Time
	cache           bool

	mu     sync.Mutex
	proofs map[string]proof
	mis    map[string]azcore.TokenCredential // VM managed identity credentials by selector
	flight singleflight.Group
}

func credKey(m *mount, authority string) string {
	parts := []string{authority, string(m.mode), m.tenantID}
	switch m.mode {
	case AuthWorkloadIdentity:
		parts = append(parts, m.clientID, m.saToken)
	case AuthServicePrincipal:
		parts = append(parts, m.clientID, m.clientSecret)
	case AuthVMManagedIdentity:
		parts = append(parts, m.userAssigned)
	case AuthPodIdentity:
		parts = append(parts, m.podNamespace, m.podName)
	}
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// prove returns the mount's proven identity and Key Vault token.
func (p *prover) prove(ctx context.Context, c cloudEnv, m *mount) (proof, error) {
	key := credKey(m, c.authority)
	cached := func() (proof, bool) {
		if !p.cache {
			return proof{}, false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		pr, ok := p.proofs[key]
		return pr, ok && p.now().Add(tokenMargin).Before(pr.token.ExpiresOn)
	}
	if pr, ok := cached(); ok {
		return pr, nil
	}
	exchange := func() (any, error) {
		if pr, ok := cached(); ok { // a flight that ended just before this one began
			return pr, nil
		}
		cred, err := p.credential(c, m)
		if err != nil {
			return proof{}, err
		}
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{c.keyVaultScope}, TenantID: m.tenantID})
		if err != nil {
			return proof{}, fmt.Errorf("%w (%s): %w", ErrAuthentication, m.mode, err)
		}
		id, err := identityOf(tok.Token)
		if err != nil {
			return proof{}, fmt.Errorf("%w (%s): %w", ErrAuthentication, m.mode, err)
		}
		pr := proof{identity: id, token: tok}
		if p.cache {
			p.mu.Lock()
			p.prune()
			p.proofs[key] = pr
			p.mu.Unlock()
		}
		return pr, nil
	}
	if !p.cache { // the upstream provider's behaviour: every mount its own exchange
		v, err := exchange()
		if err != nil {
			return proof{}, err
		}
		return v.(proof), nil
	}
	v, err, _ := p.flight.Do(key, exchange)
	if err != nil {
		return proof{}, err
	}
	return v.(proof), nil
}

// prune drops expired proofs; called with mu held.
func (p *prover) prune() {
	if len(p.proofs) < 4096 {
		return
	}
	now := p.now()
	for k, pr := range p.proofs {
		if !now.Add(tokenMargin).Before(pr.token.ExpiresOn) {
			delete(p.proofs, k)
		}
	}
}

// credential builds the mount's credential through the SDK (or the node agent's protocol).
func (p *prover) credential(c cloudEnv, m *mount) (azcore.TokenCredential, error) {
	cfg := p.azure
	cfg.AuthorityHost = c.authority
	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	switch m.mode {
	case AuthWorkloadIdentity:
		saToken := m.saToken
		return azure.NewCredential(azure.ClientCredential{TenantID: m.tenantID, ClientID: m.clientID,
			Assertion: func(context.Context) (string, error) { return saToken, nil }}, opts)
	case AuthServicePrincipal:
		return azure.NewCredential(azure.ClientCredential{TenantID: m.tenantID, ClientID: m.clientID, Secret: m.clientSecret}, opts)
	case AuthPodIdentity:
		return &azure.PodIdentityCredential{Endpoint: p.podURL, PodName: m.podName, PodNamespace: m.podNamespace}, nil
	case AuthVMManagedIdentity:
		p.mu.Lock()
		defer p.mu.Unlock()
		miKey := c.authority + " " + m.userAssigned
		if cred, ok := p.mis[miKey]; ok {
			return cred, nil
		}
		var cred azcore.TokenCredential
		var err error
		if p.managedIdentity != nil {
			cred, err = p.managedIdentity(m.userAssigned)
		} else {
			o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts}
			switch {
			case strings.HasPrefix(m.userAssigned, "/"):
				o.ID = azidentity.ResourceID(m.userAssigned)
			case m.userAssigned != "":
				o.ID = azidentity.ClientID(m.userAssigned)
			}
			cred, err = azidentity.NewManagedIdentityCredential(o)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (%s): %w", ErrAuthentication, m.mode, err)
		}
		p.mis[miKey] = cred
		return cred, nil
	}
	return nil, fmt.Errorf("%w: unknown mode %q", ErrInvalidParameters, m.mode)
}

// identityOf reads the tenant and object id of a token that Entra ID has just issued to us over
// TLS; Key Vault verifies its signature on every request.
func identityOf(token string) (string, error) {
	var c struct {
		jwt.RegisteredClaims
		TID string `json:"tid"`
		OID string `json:"oid"`
	}
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		return "", fmt.Errorf("read token claims: %w", err)
	}
	if c.TID == "" || c.OID == "" {
		return "", errors.New("the token names no tenant and object id")
	}
	return c.TID + "/" + c.OID, nil
}

// staticToken hands the azsecrets client the proven token of its identity.
type staticToken struct {
	mu  sync.Mutex
	tok azcore.AccessToken
}

func (s *staticToken) set(t azcore.AccessToken) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ExpiresOn.After(s.tok.ExpiresOn) {
		s.tok = t
	}
}

func (s *staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tok, nil
}
