package controlplaneidentities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/azure/identitycreds"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// Identity is a user-assigned identity as ARM shows it.
type Identity struct {
	ID, ClientID, PrincipalID, TenantID string
}

// Vault is a key vault as ARM shows it.
type Vault struct {
	ID, Name, URI, TenantID string
}

// Azure is what the controller asks of Azure. Every call takes the credential to use: the
// object's (ASO's credential-from, the namespace's aso-credential, or the manager's).
type Azure interface {
	// Identity reads a user-assigned identity from ARM.
	Identity(ctx context.Context, cred azcore.TokenCredential, id string) (Identity, error)
	// Vault reads a vault from ARM.
	Vault(ctx context.Context, cred azcore.TokenCredential, id string) (Vault, error)
	// IssueCredentials asks the managed-identity data plane for new credentials of the identity.
	IssueCredentials(ctx context.Context, cred azcore.TokenCredential, identityID string) (hcpcredentials.File, error)
	// CurrentSecret is the latest version of a Key Vault secret and its value; "" when it does
	// not exist.
	CurrentSecret(ctx context.Context, cred azcore.TokenCredential, vaultURI, name string) (version, value string, err error)
	// SetSecret writes a new version of a Key Vault secret and returns the version.
	SetSecret(ctx context.Context, cred azcore.TokenCredential, vaultURI, name, value string) (string, error)
	// DeleteSecret deletes a Key Vault secret (soft delete where the vault has it); a missing
	// secret is not an error.
	DeleteSecret(ctx context.Context, cred azcore.TokenCredential, vaultURI, name string) error
}

// SDK is Azure through the real SDK clients.
type SDK struct {
	// ARM are the ARM clients' options.
	ARM *arm.ClientOptions
	// KeyVault are the azsecrets clients' options.
	KeyVault *azsecrets.ClientOptions
	// IdentityURL is the managed-identity data plane's URL (x-ms-identity-url).
	IdentityURL string
	// Scope is the data plane token's scope (ARM's audience + "/.default").
	Scope string
}

// ErrNoIdentityURL reports a manager with no managed-identity data plane to ask.
var ErrNoIdentityURL = errors.New("no managed-identity data plane URL is configured (CERULEAN_IDENTITY_URL)")

func parseID(id, wantType string) (*arm.ResourceID, error) {
	rid, err := arm.ParseResourceID(id)
	if err != nil {
		return nil, fmt.Errorf("parse resource id %q: %w", id, err)
	}
	if !strings.EqualFold(rid.ResourceType.String(), wantType) {
		return nil, fmt.Errorf("parse resource id %q: not a %s", id, wantType)
	}
	return rid, nil
}

// Identity implements Azure.
func (s *SDK) Identity(ctx context.Context, cred azcore.TokenCredential, id string) (Identity, error) {
	rid, err := parseID(id, "Microsoft.ManagedIdentity/userAssignedIdentities")
	if err != nil {
		return Identity{}, err
	}
	c, err := armmsi.NewUserAssignedIdentitiesClient(rid.SubscriptionID, cred, s.ARM)
	if err != nil {
		return Identity{}, fmt.Errorf("create identities client: %w", err)
	}
	res, err := c.Get(ctx, rid.ResourceGroupName, rid.Name, nil)
	if err != nil {
		return Identity{}, fmt.Errorf("read identity %s: %w", id, err)
	}
	out := Identity{ID: ptr.Deref(res.ID, id)}
	if p := res.Properties; p != nil {
		out.ClientID, out.PrincipalID, out.TenantID = ptr.Deref(p.ClientID, ""), ptr.Deref(p.PrincipalID, ""), ptr.Deref(p.TenantID, "")
	}
	return out, nil
}

// Vault implements Azure.
func (s *SDK) Vault(ctx context.Context, cred azcore.TokenCredential, id string) (Vault, error) {
	rid, err := parseID(id, "Microsoft.KeyVault/vaults")
	if err != nil {
		return Vault{}, err
	}
	c, err := armkeyvault.NewVaultsClient(rid.SubscriptionID, cred, s.ARM)
	if err != nil {
		return Vault{}, fmt.Errorf("create vaults client: %w", err)
	}
	res, err := c.Get(ctx, rid.ResourceGroupName, rid.Name, nil)
	if err != nil {
		return Vault{}, fmt.Errorf("read vault %s: %w", id, err)
	}
	out := Vault{ID: ptr.Deref(res.ID, id), Name: ptr.Deref(res.Name, rid.Name)}
	if p := res.Properties; p != nil {
		out.URI, out.TenantID = ptr.Deref(p.VaultURI, ""), ptr.Deref(p.TenantID, "")
	}
	return out, nil
}

// IssueCredentials implements Azure.
func (s *SDK) IssueCredentials(ctx context.Context, cred azcore.TokenCredential, identityID string) (hcpcredentials.File, error) {
	if s.IdentityURL == "" {
		return hcpcredentials.File{}, ErrNoIdentityURL
	}
	var opts azcore.ClientOptions
	if s.ARM != nil {
		opts = s.ARM.ClientOptions
	}
	c, err := identitycreds.New(identitycreds.Options{URL: s.IdentityURL, Credential: cred, Scope: s.Scope, ClientOptions: opts})
	if err != nil {
		return hcpcredentials.File{}, err
	}
	got, err := c.Get(ctx, identityID)
	if err != nil {
		return hcpcredentials.File{}, err
	}
	return got.File, nil
}

func (s *SDK) secrets(cred azcore.TokenCredential, vaultURI string) (*azsecrets.Client, error) {
	var opts azsecrets.ClientOptions
	if s.KeyVault != nil {
		opts = *s.KeyVault
	}
	c, err := azsecrets.NewClient(vaultURI, cred, &opts)
	if err != nil {
		return nil, fmt.Errorf("create Key Vault client for %s: %w", vaultURI, err)
	}
	return c, nil
}

// CurrentSecret implements Azure.
func (s *SDK) CurrentSecret(ctx context.Context, cred azcore.TokenCredential, vaultURI, name string) (string, string, error) {
	c, err := s.secrets(cred, vaultURI)
	if err != nil {
		return "", "", err
	}
	res, err := c.GetSecret(ctx, name, "", nil)
	if isStatus(err, http.StatusNotFound) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("read Key Vault secret %s in %s: %w", name, vaultURI, err)
	}
	if res.ID == nil || res.Value == nil {
		return "", "", nil
	}
	return res.ID.Version(), *res.Value, nil
}

// SetSecret implements Azure.
func (s *SDK) SetSecret(ctx context.Context, cred azcore.TokenCredential, vaultURI, name, value string) (string, error) {
	c, err := s.secrets(cred, vaultURI)
	if err != nil {
		return "", err
	}
	res, err := c.SetSecret(ctx, name, azsecrets.SetSecretParameters{Value: &value, ContentType: ptr.To("application/json"),
		Tags: map[string]*string{"managed-by": ptr.To("cerulean")}}, nil)
	if err != nil {
		return "", fmt.Errorf("set Key Vault secret %s in %s: %w", name, vaultURI, err)
	}
	if res.ID == nil {
		return "", fmt.Errorf("set Key Vault secret %s in %s: no id in the answer", name, vaultURI)
	}
	return res.ID.Version(), nil
}

// DeleteSecret implements Azure.
func (s *SDK) DeleteSecret(ctx context.Context, cred azcore.TokenCredential, vaultURI, name string) error {
	c, err := s.secrets(cred, vaultURI)
	if err != nil {
		return err
	}
	if _, err := c.DeleteSecret(ctx, name, nil); err != nil && !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("delete Key Vault secret %s in %s: %w", name, vaultURI, err)
	}
	return nil
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// marshal is the credentials JSON as stored: the reference's field names.
func marshal(f hcpcredentials.File) (string, error) {
	b, err := json.Marshal(f) //nolint:gosec // the credentials file is the secret this writes to Key Vault, by design
	if err != nil {
		return "", fmt.Errorf("encode credentials: %w", err)
	}
	return string(b), nil
}
