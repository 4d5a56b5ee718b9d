package keyvault

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	kv "github.com/cerulean/cerulean/internal/cloud/keyvault"
)

// Provisioning states of a vault: a new vault registers its "DNS" (here: starts its listener)
// before it succeeds.
const (
	stateRegistering = "RegisteringDns"
	stateSucceeded   = "Succeeded"
)

type sku struct {
	Family string `json:"family"`
	Name   string `json:"name"`
}

// vaultProperties are a vault's properties as ARM shows them; what the data plane needs is
// copied to its registry.
type vaultProperties struct {
	TenantID                     string            `json:"tenantId"`
	SKU                          *sku              `json:"sku"`
	AccessPolicies               []kv.AccessPolicy `json:"accessPolicies"`
	VaultURI                     string            `json:"vaultUri,omitempty"`
	EnabledForDeployment         *bool             `json:"enabledForDeployment,omitempty"`
	EnabledForDiskEncryption     *bool             `json:"enabledForDiskEncryption,omitempty"`
	EnabledForTemplateDeployment *bool             `json:"enabledForTemplateDeployment,omitempty"`
	EnableSoftDelete             *bool             `json:"enableSoftDelete,omitempty"`
	SoftDeleteRetentionInDays    *int32            `json:"softDeleteRetentionInDays,omitempty"`
	EnableRbacAuthorization      *bool             `json:"enableRbacAuthorization,omitempty"`
	CreateMode                   *string           `json:"createMode,omitempty"` // input only
	EnablePurgeProtection        *bool             `json:"enablePurgeProtection,omitempty"`
	NetworkACLs                  json.RawMessage   `json:"networkAcls,omitempty"`
	PublicNetworkAccess          *string           `json:"publicNetworkAccess,omitempty"`
	ProvisioningState            string            `json:"provisioningState,omitempty"`
}

// vaultBody is the PUT body.
type vaultBody struct {
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags"`
	Properties *vaultProperties  `json:"properties"`
}

// patchBody is the PATCH body: every property optional.
type patchBody struct {
	Tags       map[string]string `json:"tags"`
	Properties *vaultProperties  `json:"properties"`
}

type vaultJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Properties vaultProperties   `json:"properties"`
}

func decodeProps(r arm.Resource) vaultProperties {
	var p vaultProperties
	_ = json.Unmarshal(r.Properties, &p) // written by this provider
	return p
}

func vaultView(r arm.Resource) vaultJSON {
	return vaultJSON{ID: r.ID, Name: r.Name, Type: VaultType, Location: r.Location, Tags: r.Tags, Properties: decodeProps(r)}
}

// viewFor renders vaults for the request of ctx: the vaultUri is https://NAME.vault.azure.net/
// when ARM was reached under its public name (the proxy serves that name too), the vault's
// loopback origin otherwise.
func viewFor(ctx context.Context) func(arm.Resource) vaultJSON {
	if !arm.PublicNames(ctx) {
		return vaultView
	}
	return func(r arm.Resource) vaultJSON {
		v := vaultView(r)
		if v.Properties.VaultURI != "" {
			v.Properties.VaultURI = azurenames.VaultURI(r.Name)
		}
		return v
	}
}

// vaultName: 3-24 characters, letters, digits and hyphens, starting with a letter, ending with a
// letter or digit, without consecutive hyphens.
var vaultName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]{1,22}[a-zA-Z0-9]$`)

func validName(name string) bool { return vaultName.MatchString(name) && !strings.Contains(name, "--") }

func errVaultName(name string) *arm.Error {
	return arm.Errorf(http.StatusBadRequest, "VaultNameNotValid",
		"The vault name '%s' is invalid. A vault's name must be between 3-24 alphanumeric characters. The name must begin with a letter, end with a letter or digit, and not contain consecutive hyphens. Follow this link for more information: https://go.microsoft.com/fwlink/?linkid=2147742", clipName(name))
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Permission values an access policy may hold, per object kind.
var allowedPermissions = map[string][]string{
	"keys": {"all", "encrypt", "decrypt", "wrapkey", "unwrapkey", "sign", "verify", "get", "list", "create", "update", "import",
		"delete", "backup", "restore", "recover", "purge", "release", "rotate", "getrotationpolicy", "setrotationpolicy"},
	"secrets": {"all", "get", "list", "set", "delete", "backup", "restore", "recover", "purge"},
	"certificates": {"all", "get", "list", "delete", "create", "import", "update", "managecontacts", "getissuers", "listissuers",
		"setissuers", "deleteissuers", "manageissuers", "recover", "purge", "backup", "restore"},
	"storage": {"all", "get", "list", "delete", "set", "update", "regeneratekey", "recover", "purge", "backup", "restore",
		"setsas", "listsas", "getsas", "deletesas"},
}

const maxAccessPolicies = 1024

func validatePolicies(aps []kv.AccessPolicy) error {
	if len(aps) > maxAccessPolicies {
		return arm.ErrBadRequest("A vault may have at most %d access policies.", maxAccessPolicies)
	}
	for i := range aps {
		ap := &aps[i]
		if _, err := uuid.Parse(ap.TenantID); err != nil {
			return arm.ErrBadRequest("The access policy's tenantId '%s' is not a valid GUID.", clipName(ap.TenantID))
		}
		if ap.ObjectID == "" || len(ap.ObjectID) > 128 {
			return arm.ErrBadRequest("An access policy must name an objectId.")
		}
		if ap.ApplicationID != "" {
			if _, err := uuid.Parse(ap.ApplicationID); err != nil {
				return arm.ErrBadRequest("The access policy's applicationId is not a valid GUID.")
			}
		}
		for kind, list := range map[string]*[]string{"keys": &ap.Permissions.Keys, "secrets": &ap.Permissions.Secrets,
			"certificates": &ap.Permissions.Certificates, "storage": &ap.Permissions.Storage} {
			if len(*list) > 32 {
				return arm.ErrBadRequest("Too many %s permissions in an access policy.", kind)
			}
			for j, perm := range *list {
				if !slices.Contains(allowedPermissions[kind], strings.ToLower(perm)) {
					return arm.ErrBadRequest("The %s permission '%s' is not valid.", kind, clipName(perm))
				}
				(*list)[j] = strings.ToLower(perm)
			}
		}
	}
	return nil
}

// validateCreate checks a PUT body and fills in the service's defaults.
func validateCreate(b *vaultBody) error {
	if err := arm.CheckLocation(b.Location); err != nil {
		return err
	}
	if err := arm.ValidateTags(b.Tags); err != nil {
		return err
	}
	if b.Properties == nil {
		return arm.ErrBadRequest("The 'properties' of the vault are required.")
	}
	p := b.Properties
	if _, err := uuid.Parse(p.TenantID); err != nil {
		return arm.ErrBadRequest("The 'tenantId' property must be a GUID.")
	}
	if p.SKU == nil || !strings.EqualFold(p.SKU.Family, "A") || !slices.Contains([]string{"standard", "premium"}, strings.ToLower(p.SKU.Name)) {
		return arm.ErrBadRequest("The 'sku' property must have family 'A' and name 'standard' or 'premium'.")
	}
	p.SKU = &sku{Family: "A", Name: strings.ToLower(p.SKU.Name)}
	if p.CreateMode != nil && !slices.Contains([]string{"default", "recover"}, strings.ToLower(*p.CreateMode)) {
		return arm.ErrBadRequest("The 'createMode' must be 'default' or 'recover'.")
	}
	if p.AccessPolicies == nil {
		p.AccessPolicies = []kv.AccessPolicy{}
	}
	if err := validatePolicies(p.AccessPolicies); err != nil {
		return err
	}
	if len(p.NetworkACLs) > 64<<10 {
		return arm.ErrBadRequest("The 'networkAcls' property is too large.")
	}
	return validateFlags(p, nil)
}

// validateFlags checks the soft-delete settings against the vault's current ones (old, nil on
// create) and fills in defaults: soft delete is mandatory, retention is 7-90 days and fixed once
// set, and purge protection cannot be turned off again.
func validateFlags(p *vaultProperties, old *vaultProperties) error {
	t := true
	if p.EnableSoftDelete != nil && !*p.EnableSoftDelete {
		return arm.ErrBadRequest("The property \"enableSoftDelete\" has been set to false. Enabling the 'soft delete' functionality is mandatory for all key vaults. To learn more, go to https://aka.ms/softdeletechange")
	}
	p.EnableSoftDelete = &t
	if p.SoftDeleteRetentionInDays != nil {
		if d := *p.SoftDeleteRetentionInDays; d < 7 || d > 90 {
			return arm.ErrBadRequest("The 'softDeleteRetentionInDays' must be between 7 and 90.")
		}
		if old != nil && *old.SoftDeleteRetentionInDays != *p.SoftDeleteRetentionInDays {
			return arm.ErrBadRequest("The 'softDeleteRetentionInDays' of an existing vault cannot be changed.")
		}
	} else if old != nil {
		p.SoftDeleteRetentionInDays = old.SoftDeleteRetentionInDays
	} else {
		d := int32(90)
		p.SoftDeleteRetentionInDays = &d
	}
	if old != nil && old.EnablePurgeProtection != nil && *old.EnablePurgeProtection {
		if p.EnablePurgeProtection != nil && !*p.EnablePurgeProtection {
			return arm.ErrBadRequest("The property \"enablePurgeProtection\" cannot be set to false. Once purge protection is enabled it cannot be disabled.")
		}
		p.EnablePurgeProtection = &t
	}
	if p.EnableRbacAuthorization == nil {
		f := false
		p.EnableRbacAuthorization = &f
	}
	if p.PublicNetworkAccess == nil {
		e := "Enabled"
		p.PublicNetworkAccess = &e
	}
	return nil
}

// registryOf is the data plane's view of a vault resource.
func registryOf(r arm.Resource, p vaultProperties, port int) kv.Vault {
	return kv.Vault{
		Name: r.Name, ResourceID: r.ID, TenantID: p.TenantID, Location: r.Location, Port: port,
		RBAC: p.EnableRbacAuthorization != nil && *p.EnableRbacAuthorization, AccessPolicies: p.AccessPolicies,
		SoftDelete: p.EnableSoftDelete == nil || *p.EnableSoftDelete, RetentionDays: int(deref(p.SoftDeleteRetentionInDays, 90)),
		PurgeProtection: p.EnablePurgeProtection != nil && *p.EnablePurgeProtection,
		Premium:         p.SKU != nil && p.SKU.Name == "premium",
	}
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
