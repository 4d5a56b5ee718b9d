package entra

import (
	"context"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // x5t is defined as a SHA-1 thumbprint
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Kind tells service principals (apps) from managed identities.
type Kind string

// The principal kinds.
const (
	KindServicePrincipal Kind = "ServicePrincipal"
	KindManagedIdentity  Kind = "ManagedIdentity"
)

// MaxFederatedCredentials is Azure's limit per identity.
const MaxFederatedCredentials = 20

// Sentinel errors of the directory.
var (
	ErrNotFound = store.ErrNotFound
	ErrInvalid  = errors.New("invalid")
	ErrConflict = errors.New("conflict")
)

// Tenant is an Entra ID directory.
type Tenant struct {
	ID          string    `json:"id"`
	DisplayName string    `json:"displayName"`
	Created     time.Time `json:"created"`
}

// Principal is something that gets tokens: a service principal (with secrets and certificates) or
// a managed identity (with federated identity credentials; part 2's ARM creates these).
type Principal struct {
	TenantID    string    `json:"tenantId"`
	ObjectID    string    `json:"objectId"` // the token's oid
	ClientID    string    `json:"clientId"` // the token's appid / azp
	Kind        Kind      `json:"kind"`
	DisplayName string    `json:"displayName"`
	ResourceID  string    `json:"resourceId,omitempty"` // managed identities: the ARM id, the token's xms_mirid
	Created     time.Time `json:"created"`

	Secrets              []Secret              `json:"secrets,omitempty"`
	Certificates         []Certificate         `json:"certificates,omitempty"`
	FederatedCredentials []FederatedCredential `json:"federatedCredentials,omitempty"`
}

// Secret is a client secret. Only its SHA-256 is kept: secrets are 240-bit random strings, so a
// fast hash loses nothing to guessing, and the state file never holds a usable secret.
type Secret struct {
	KeyID   string    `json:"keyId"`
	Hint    string    `json:"hint"` // first three characters, as the portal shows
	SHA256  []byte    `json:"sha256"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Certificate is a registered public certificate (a key credential).
type Certificate struct {
	KeyID   string    `json:"keyId"`
	SHA1    []byte    `json:"sha1"`
	SHA256  []byte    `json:"sha256"`
	DER     []byte    `json:"der"`
	Expires time.Time `json:"expires"`
}

// FederatedCredential trusts tokens of an external issuer for one subject.
type FederatedCredential struct {
	Name      string   `json:"name"`
	Issuer    string   `json:"issuer"`
	Subject   string   `json:"subject"`
	Audiences []string `json:"audiences"`
}

// Buckets of the directory.
const (
	bucketTenants    = "entra.tenants"
	bucketPrincipals = "entra.principals" // tenantID/clientID
	bucketObjects    = "entra.objects"    // tenantID/objectID -> clientID
)

// Directory stores tenants and principals. Every method is one transaction.
type Directory struct {
	st  *store.Store
	now func() time.Time
}

// NewDirectory returns the directory kept in st.
func NewDirectory(st *store.Store, now func() time.Time) *Directory {
	return &Directory{st: st, now: now}
}

func principalKey(tenantID, clientID string) string {
	return strings.ToLower(tenantID) + "/" + strings.ToLower(clientID)
}

// CreateTenant creates a tenant with a new id.
func (d *Directory) CreateTenant(ctx context.Context, displayName string) (Tenant, error) {
	t := Tenant{ID: uuid.NewString(), DisplayName: displayName, Created: d.now().UTC()}
	if err := d.st.Update(ctx, func(tx *store.Tx) error { return tx.Put(bucketTenants, t.ID, t) }); err != nil {
		return Tenant{}, fmt.Errorf("create tenant: %w", err)
	}
	return t, nil
}

// Tenant returns the tenant with this id (any case), or ErrNotFound.
func (d *Directory) Tenant(ctx context.Context, id string) (Tenant, error) {
	var t Tenant
	if _, err := uuid.Parse(id); err != nil {
		return t, ErrNotFound
	}
	err := d.st.View(ctx, func(tx *store.Tx) error { return tx.Get(bucketTenants, strings.ToLower(id), &t) })
	return t, err
}

// CreatePrincipal stores a new principal; empty ObjectID and ClientID are generated.
func (d *Directory) CreatePrincipal(ctx context.Context, p Principal) (Principal, error) {
	var out Principal
	err := d.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = d.CreatePrincipalTx(tx, p)
		return err
	})
	return out, err
}

// Principal returns the principal with this client id in the tenant, or ErrNotFound.
func (d *Directory) Principal(ctx context.Context, tenantID, clientID string) (Principal, error) {
	var p Principal
	err := d.st.View(ctx, func(tx *store.Tx) error { return tx.Get(bucketPrincipals, principalKey(tenantID, clientID), &p) })
	return p, err
}

// PrincipalByObjectID returns the principal with this object id in the tenant, or ErrNotFound.
func (d *Directory) PrincipalByObjectID(ctx context.Context, tenantID, objectID string) (Principal, error) {
	var p Principal
	err := d.st.View(ctx, func(tx *store.Tx) error {
		var clientID string
		if err := tx.Get(bucketObjects, principalKey(tenantID, objectID), &clientID); err != nil {
			return err
		}
		return tx.Get(bucketPrincipals, principalKey(tenantID, clientID), &p)
	})
	return p, err
}

// Principals lists a tenant's principals in client-id order.
func (d *Directory) Principals(ctx context.Context, tenantID string) ([]Principal, error) {
	var out []Principal
	err := d.st.View(ctx, func(tx *store.Tx) error {
		return tx.ForEach(bucketPrincipals, strings.ToLower(tenantID)+"/", func(_ string, decode func(any) error) error {
			var p Principal
			if err := decode(&p); err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// UpdatePrincipal applies fn to the stored principal in one transaction; fn's error aborts it.
func (d *Directory) UpdatePrincipal(ctx context.Context, tenantID, clientID string, fn func(*Principal) error) (Principal, error) {
	var p Principal
	err := d.st.Update(ctx, func(tx *store.Tx) error {
		key := principalKey(tenantID, clientID)
		if err := tx.Get(bucketPrincipals, key, &p); err != nil {
			return err
		}
		if err := fn(&p); err != nil {
			return err
		}
		return tx.Put(bucketPrincipals, key, p)
	})
	if err != nil {
		return Principal{}, fmt.Errorf("update principal %s: %w", clientID, err)
	}
	return p, nil
}

// DeletePrincipal removes a principal; a missing one is not an error.
func (d *Directory) DeletePrincipal(ctx context.Context, tenantID, clientID string) error {
	return d.st.Update(ctx, func(tx *store.Tx) error { return d.DeletePrincipalTx(tx, tenantID, clientID) })
}

// AddSecret creates a client secret valid until expires and returns its value, the only time it
// is available.
func (d *Directory) AddSecret(ctx context.Context, tenantID, clientID string, expires time.Time) (string, Secret, error) {
	value := NewSecretValue()
	sum := sha256.Sum256([]byte(value))
	s := Secret{KeyID: uuid.NewString(), Hint: value[:3], SHA256: sum[:], Created: d.now().UTC(), Expires: expires.UTC()}
	_, err := d.UpdatePrincipal(ctx, tenantID, clientID, func(p *Principal) error {
		p.Secrets = append(p.Secrets, s)
		return nil
	})
	if err != nil {
		return "", Secret{}, fmt.Errorf("add secret: %w", err)
	}
	return value, s, nil
}

// NewSecretValue returns 40 URL-safe characters (about 240 random bits), safe to print unquoted
// in a shell. It never starts with '-': command lines such as `az login -p "$SECRET"` would read
// such a secret as an option (Azure's own secrets never start with one either).
func NewSecretValue() string {
	b := make([]byte, 30)
	for {
		_, _ = rand.Read(b)
		if v := base64.RawURLEncoding.EncodeToString(b); v[0] != '-' {
			return v
		}
	}
}

// AddCertificate registers a public certificate.
func (d *Directory) AddCertificate(ctx context.Context, tenantID, clientID string, cert *x509.Certificate) (Certificate, error) {
	s1 := sha1.Sum(cert.Raw) //nolint:gosec // x5t
	s256 := sha256.Sum256(cert.Raw)
	c := Certificate{KeyID: uuid.NewString(), SHA1: s1[:], SHA256: s256[:], DER: cert.Raw, Expires: cert.NotAfter.UTC()}
	_, err := d.UpdatePrincipal(ctx, tenantID, clientID, func(p *Principal) error {
		p.Certificates = append(p.Certificates, c)
		return nil
	})
	if err != nil {
		return Certificate{}, fmt.Errorf("add certificate: %w", err)
	}
	return c, nil
}

// PutFederatedCredential creates or replaces the named federated credential, enforcing Azure's
// rules: an https issuer, a subject, exactly one audience, at most 20 per identity, and issuer +
// subject unique per identity. It reports whether the credential was created.
func (d *Directory) PutFederatedCredential(ctx context.Context, tenantID, clientID string, fic FederatedCredential) (bool, error) {
	if err := validateFIC(fic); err != nil {
		return false, err
	}
	created := false
	_, err := d.UpdatePrincipal(ctx, tenantID, clientID, func(p *Principal) error {
		idx := -1
		for i, f := range p.FederatedCredentials {
			if strings.EqualFold(f.Name, fic.Name) {
				idx = i
				continue
			}
			if f.Issuer == fic.Issuer && f.Subject == fic.Subject {
				return fmt.Errorf("federated credential %s already has issuer and subject: %w", f.Name, ErrConflict)
			}
		}
		if idx >= 0 {
			p.FederatedCredentials[idx] = fic
			return nil
		}
		if len(p.FederatedCredentials) >= MaxFederatedCredentials {
			return fmt.Errorf("at most %d federated credentials per identity: %w", MaxFederatedCredentials, ErrConflict)
		}
		created = true
		p.FederatedCredentials = append(p.FederatedCredentials, fic)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("put federated credential: %w", err)
	}
	return created, nil
}

// DeleteFederatedCredential removes the named credential; a missing one is not an error.
func (d *Directory) DeleteFederatedCredential(ctx context.Context, tenantID, clientID, name string) error {
	_, err := d.UpdatePrincipal(ctx, tenantID, clientID, func(p *Principal) error {
		kept := p.FederatedCredentials[:0]
		for _, f := range p.FederatedCredentials {
			if !strings.EqualFold(f.Name, name) {
				kept = append(kept, f)
			}
		}
		p.FederatedCredentials = kept
		return nil
	})
	return err
}

func validateFIC(f FederatedCredential) error {
	if f.Name == "" || len(f.Name) > 120 {
		return fmt.Errorf("federated credential name must have 1 to 120 characters: %w", ErrInvalid)
	}
	u, err := url.Parse(f.Issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("federated credential issuer must be an https URL: %w", ErrInvalid)
	}
	if f.Subject == "" || len(f.Subject) > 600 {
		return fmt.Errorf("federated credential subject must have 1 to 600 characters: %w", ErrInvalid)
	}
	if len(f.Audiences) != 1 || f.Audiences[0] == "" || len(f.Audiences[0]) > 600 {
		return fmt.Errorf("federated credential needs exactly one audience: %w", ErrInvalid)
	}
	return nil
}
