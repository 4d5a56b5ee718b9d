package entra

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// CreatePrincipalTx is CreatePrincipal inside the caller's transaction, so that ARM stores a
// managed identity's resource and its principal atomically (nothing half-created survives a crash).
func (d *Directory) CreatePrincipalTx(tx *store.Tx, p Principal) (Principal, error) {
	if p.ObjectID == "" {
		p.ObjectID = uuid.NewString()
	}
	if p.ClientID == "" {
		p.ClientID = uuid.NewString()
	}
	if p.Kind != KindServicePrincipal && p.Kind != KindManagedIdentity {
		return Principal{}, fmt.Errorf("create principal: kind %q: %w", p.Kind, ErrInvalid)
	}
	p.TenantID = strings.ToLower(p.TenantID)
	p.Created = d.now().UTC()
	if err := tx.Get(bucketTenants, p.TenantID, &Tenant{}); err != nil {
		return Principal{}, fmt.Errorf("create principal: tenant %s: %w", p.TenantID, err)
	}
	key := principalKey(p.TenantID, p.ClientID)
	if err := tx.Get(bucketPrincipals, key, &Principal{}); err == nil {
		return Principal{}, fmt.Errorf("create principal: client id %s: %w", p.ClientID, ErrConflict)
	}
	if err := tx.Put(bucketPrincipals, key, p); err != nil {
		return Principal{}, fmt.Errorf("create principal: %w", err)
	}
	if err := tx.Put(bucketObjects, principalKey(p.TenantID, p.ObjectID), p.ClientID); err != nil {
		return Principal{}, fmt.Errorf("create principal: %w", err)
	}
	return p, nil
}

// PrincipalTx is Principal inside the caller's transaction.
func (d *Directory) PrincipalTx(tx *store.Tx, tenantID, clientID string) (Principal, error) {
	var p Principal
	err := tx.Get(bucketPrincipals, principalKey(tenantID, clientID), &p)
	return p, err
}

// PrincipalByObjectIDTx is PrincipalByObjectID inside the caller's transaction.
func (d *Directory) PrincipalByObjectIDTx(tx *store.Tx, tenantID, objectID string) (Principal, error) {
	var clientID string
	if err := tx.Get(bucketObjects, principalKey(tenantID, objectID), &clientID); err != nil {
		return Principal{}, err
	}
	return d.PrincipalTx(tx, tenantID, clientID)
}

// DeletePrincipalTx is DeletePrincipal inside the caller's transaction; a missing principal is
// not an error.
func (d *Directory) DeletePrincipalTx(tx *store.Tx, tenantID, clientID string) error {
	var p Principal
	key := principalKey(tenantID, clientID)
	if err := tx.Get(bucketPrincipals, key, &p); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := tx.Delete(bucketObjects, principalKey(tenantID, p.ObjectID)); err != nil {
		return err
	}
	return tx.Delete(bucketPrincipals, key)
}
