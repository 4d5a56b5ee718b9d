package keyvault

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// bucketVaults is the registry of vaults by lower-case name: the data plane's view of each vault
// and the port it is served on. Names are unique across the cloud, deleted vaults included,
// until they are purged.
const bucketVaults = "keyvault.vaults"

// Vault is a vault as the data plane sees it. The management plane writes it in the same
// transaction as the ARM resource, so the two never disagree.
type Vault struct {
	Name            string         `json:"name"` // creation case
	ResourceID      string         `json:"resourceId"`
	TenantID        string         `json:"tenantId"`
	Location        string         `json:"location"`
	Port            int            `json:"port"` // on 127.0.0.1; fixed for the vault's life
	RBAC            bool           `json:"enableRbacAuthorization"`
	AccessPolicies  []AccessPolicy `json:"accessPolicies,omitempty"`
	SoftDelete      bool           `json:"enableSoftDelete"`
	RetentionDays   int            `json:"softDeleteRetentionInDays"`
	PurgeProtection bool           `json:"enablePurgeProtection"`
	Premium         bool           `json:"premium,omitempty"` // the premium SKU: -HSM key types

	// Deleted is when the vault was soft-deleted (zero while it is active); PurgeAt is when it
	// disappears for good.
	Deleted time.Time `json:"deleted,omitzero"`
	PurgeAt time.Time `json:"purgeAt,omitzero"`
	// Snapshot is the management plane's resource, kept while the vault is soft-deleted so
	// that recovering it restores every property.
	Snapshot json.RawMessage `json:"snapshot,omitempty"`

	// public is set, never stored, while serving a request that reached the vault as
	// NAME.vault.azure.net: its answers then name that origin and Azure's public authority.
	public bool
}

// AccessPolicy is one entry of a vault's accessPolicies, as ARM shows it.
type AccessPolicy struct {
	TenantID      string      `json:"tenantId"`
	ObjectID      string      `json:"objectId"`
	ApplicationID string      `json:"applicationId,omitempty"`
	Permissions   Permissions `json:"permissions"`
}

// Permissions are an access policy's permission lists.
type Permissions struct {
	Keys         []string `json:"keys,omitempty"`
	Secrets      []string `json:"secrets,omitempty"`
	Certificates []string `json:"certificates,omitempty"`
	Storage      []string `json:"storage,omitempty"`
}

// IsDeleted reports whether the vault is soft-deleted.
func (v Vault) IsDeleted() bool { return !v.Deleted.IsZero() }

// URI is the vault's vaultUri as the current request sees it: https://NAME.vault.azure.net/ for
// a request that reached it under that name (through the cloud's proxy), its loopback origin
// otherwise.
func (v Vault) URI() string {
	if v.public {
		return azurenames.VaultURI(v.Name)
	}
	return VaultURI(v.Port)
}

// VaultURI is the URI of the vault served on port.
func VaultURI(port int) string { return fmt.Sprintf("https://127.0.0.1:%d/", port) }

// RecoveryLevel is the recoveryLevel attribute of the vault's objects.
func (v Vault) RecoveryLevel() string {
	if !v.SoftDelete {
		return "Purgeable"
	}
	level := "Recoverable"
	if v.RetentionDays < 90 {
		level = "CustomizedRecoverable"
	}
	if !v.PurgeProtection {
		level += "+Purgeable"
	}
	return level
}

func vaultKey(name string) string { return strings.ToLower(name) }

// ErrVaultNotFound is returned by GetVaultTx for a name no vault has.
var ErrVaultNotFound = errors.New("vault not found")

// GetVaultTx returns the vault with this name (active or deleted).
func GetVaultTx(tx *store.Tx, name string) (Vault, error) {
	var v Vault
	err := tx.Get(bucketVaults, vaultKey(name), &v)
	if errors.Is(err, store.ErrNotFound) {
		return v, fmt.Errorf("get vault %s: %w", name, ErrVaultNotFound)
	}
	return v, err
}

// PutVaultTx stores the vault.
func PutVaultTx(tx *store.Tx, v Vault) error {
	if err := tx.Put(bucketVaults, vaultKey(v.Name), v); err != nil {
		return fmt.Errorf("store vault: %w", err)
	}
	return nil
}

// VaultsTx returns every vault in the registry, active and deleted.
func VaultsTx(tx *store.Tx) ([]Vault, error) {
	var out []Vault
	err := tx.ForEach(bucketVaults, "", func(_ string, decode func(any) error) error {
		var v Vault
		if err := decode(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// SoftDeleteVaultTx marks the vault deleted at now, keeping snapshot for its recovery. A vault
// without soft delete is purged at once.
func SoftDeleteVaultTx(tx *store.Tx, name string, now time.Time, snapshot json.RawMessage) (Vault, error) {
	v, err := GetVaultTx(tx, name)
	if err != nil {
		return v, err
	}
	if !v.SoftDelete {
		return v, PurgeVaultTx(tx, name)
	}
	v.Deleted = now.UTC().Truncate(time.Second)
	v.PurgeAt = v.Deleted.AddDate(0, 0, v.RetentionDays)
	v.Snapshot = snapshot
	return v, PutVaultTx(tx, v)
}

// PurgeVaultTx removes the vault and every secret it holds; its name and port become free.
func PurgeVaultTx(tx *store.Tx, name string) error {
	if err := deletePrefix(tx, bucketHeads, vaultKey(name)+"/"); err != nil {
		return err
	}
	if err := deletePrefix(tx, bucketVersions, vaultKey(name)+"/"); err != nil {
		return err
	}
	for _, b := range objectBuckets {
		if err := deletePrefix(tx, b, vaultKey(name)+"/"); err != nil {
			return err
		}
	}
	return tx.Delete(bucketVaults, vaultKey(name))
}

func deletePrefix(tx *store.Tx, bucket, prefix string) error {
	var keys []string
	err := tx.ForEach(bucket, prefix, func(k string, _ func(any) error) error {
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(bucket, k); err != nil {
			return err
		}
	}
	return nil
}
