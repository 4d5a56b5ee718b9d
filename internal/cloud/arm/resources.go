package arm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// bucketResources holds every tracked resource by lower-case id, so that a prefix scan finds
// what a resource group (or any scope) holds.
const bucketResources = "arm.resources"

// Resource is a tracked resource as stored; providers keep their own properties as raw JSON.
type Resource struct {
	ID         string            `json:"id"` // creation case
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	ManagedBy  string            `json:"managedBy,omitempty"`
	Properties json.RawMessage   `json:"properties,omitempty"`
}

// Provisioning states.
const (
	StateSucceeded = "Succeeded"
	StateDeleting  = "Deleting"
)

type provisioning struct {
	ProvisioningState string `json:"provisioningState"`
}

// GetTx returns the resource with this id, or ErrNotFound for its type.
func GetTx(tx *store.Tx, id armid.ID) (Resource, error) {
	var r Resource
	err := tx.Get(bucketResources, id.Key(), &r)
	if errors.Is(err, store.ErrNotFound) {
		return r, ErrNotFound(id)
	}
	return r, err
}

// PutTx stores a resource.
func PutTx(tx *store.Tx, r Resource) error {
	if err := tx.Put(bucketResources, strings.ToLower(r.ID), r); err != nil {
		return fmt.Errorf("store resource: %w", err)
	}
	return nil
}

// ListTx returns the resources of a type at or below scope, in id order.
func ListTx(tx *store.Tx, scope armid.ID, typ string) ([]Resource, error) {
	out := []Resource{}
	prefix := scope.Key() + "/"
	if scope.IsRoot() {
		prefix = "/"
	}
	err := tx.ForEach(bucketResources, prefix, func(_ string, decode func(any) error) error {
		var r Resource
		if err := decode(&r); err != nil {
			return err
		}
		if typ == "" || strings.EqualFold(r.Type, typ) {
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// OnDelete registers what deleting a resource of a type also removes (a managed identity's
// principal). It runs in the deleting transaction.
func (s *Service) OnDelete(typ string, fn func(tx *store.Tx, r Resource) error) {
	s.onDelete[strings.ToLower(typ)] = fn
}

// DeleteTx removes a resource, everything stored below it, their role assignments and what
// their types' OnDelete hooks remove, deepest first, in tx.
func (s *Service) DeleteTx(tx *store.Tx, r Resource) error {
	id, err := armid.Parse(r.ID)
	if err != nil {
		return fmt.Errorf("delete %s: %w", r.ID, err)
	}
	below, err := ListTx(tx, id, "")
	if err != nil {
		return err
	}
	all := append(below, r)
	slices.SortStableFunc(all, func(a, b Resource) int { return len(b.ID) - len(a.ID) })
	for _, x := range all {
		if fn := s.onDelete[strings.ToLower(x.Type)]; fn != nil {
			if err := fn(tx, x); err != nil {
				return fmt.Errorf("delete %s: %w", x.ID, err)
			}
		}
		if err := tx.Delete(bucketResources, strings.ToLower(x.ID)); err != nil {
			return err
		}
	}
	return authz.DeleteUnderTx(tx, r.ID)
}

// GroupID is the id of the resource group that holds id.
func GroupID(id armid.ID) armid.ID {
	return armid.ID{Segments: id.Segments[:2]}
}

// CheckGroupTx returns nil if the resource group holding id exists and is not being deleted:
// the precondition of creating anything in it.
func CheckGroupTx(tx *store.Tx, id armid.ID) error {
	if id.ResourceGroup() == "" {
		return nil
	}
	var g Resource
	err := tx.Get(bucketResources, GroupID(id).Key(), &g)
	if errors.Is(err, store.ErrNotFound) {
		return ErrResourceGroupNotFound(id.ResourceGroup())
	} else if err != nil {
		return err
	}
	var p provisioning
	_ = json.Unmarshal(g.Properties, &p)
	if p.ProvisioningState == StateDeleting {
		return Errorf(http.StatusConflict, "ResourceGroupBeingDeleted",
			"The resource group '%s' is in deprovisioning state and cannot perform this operation.", g.Name)
	}
	return nil
}

// ExistsTx reports whether a scope exists: the cloud's subscription, a resource group, or a
// stored resource. Role assignments may only be made on scopes that exist.
func (s *Service) ExistsTx(tx *store.Tx, scope armid.ID) (bool, error) {
	switch {
	case scope.IsRoot():
		return true, nil
	case len(scope.Segments) == 1 && scope.Subscription() != "":
		return strings.EqualFold(scope.Subscription(), s.o.SubscriptionID), nil
	}
	var r Resource
	err := tx.Get(bucketResources, scope.Key(), &r)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
