package authz

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Sentinel errors.
var (
	ErrNotFound           = store.ErrNotFound
	ErrExists             = errors.New("role assignment exists")
	ErrUpdateNotPermitted = errors.New("role assignment update not permitted")
	ErrDenied             = errors.New("authorization failed")
)

// Buckets.
const (
	bucketAssignments = "authz.assignments" // lower(id) -> Assignment
	bucketByPrincipal = "authz.byPrincipal" // lower(principalId)/lower(id) -> grant
)

// Assignment grants a role to a principal at a scope (and everything below it).
type Assignment struct {
	ID               string    `json:"id"`    // {scope}/providers/Microsoft.Authorization/roleAssignments/{name}, creation case
	Name             string    `json:"name"`  // a GUID
	Scope            string    `json:"scope"` // "/subscriptions/..." in creation case
	RoleDefinitionID string    `json:"roleDefinitionId"`
	PrincipalID      string    `json:"principalId"`
	PrincipalType    string    `json:"principalType"`
	Description      string    `json:"description,omitempty"`
	Condition        string    `json:"condition,omitempty"`
	ConditionVersion string    `json:"conditionVersion,omitempty"`
	CreatedBy        string    `json:"createdBy,omitempty"`
	CreatedOn        time.Time `json:"createdOn"`
	UpdatedBy        string    `json:"updatedBy,omitempty"`
	UpdatedOn        time.Time `json:"updatedOn"`
}

// AssignmentID is the ARM id of the assignment with this name at this scope.
func AssignmentID(scope, name string) string {
	return strings.TrimSuffix(scope, "/") + "/providers/Microsoft.Authorization/roleAssignments/" + name
}

func key(id string) string { return strings.ToLower(id) }

// sameGrant reports whether two assignments give the same role to the same principal at the same scope.
func sameGrant(a, b Assignment) bool {
	return strings.EqualFold(a.PrincipalID, b.PrincipalID) && strings.EqualFold(a.RoleDefinitionID, b.RoleDefinitionID) &&
		strings.EqualFold(strings.TrimSuffix(a.Scope, "/"), strings.TrimSuffix(b.Scope, "/"))
}

// PutTx creates the assignment in tx, or accepts a repeated PUT of the same grant under the same
// name (returning the stored one, created = false). Another name for the same grant is ErrExists;
// a different grant under an existing name is ErrUpdateNotPermitted.
func PutTx(tx *store.Tx, a Assignment) (Assignment, bool, error) {
	var old Assignment
	err := tx.Get(bucketAssignments, key(a.ID), &old)
	switch {
	case err == nil:
		if !sameGrant(old, a) {
			return old, false, fmt.Errorf("put role assignment %s: %w", a.Name, ErrUpdateNotPermitted)
		}
		old.Description, old.Condition, old.ConditionVersion = a.Description, a.Condition, a.ConditionVersion
		old.UpdatedBy, old.UpdatedOn = a.UpdatedBy, a.UpdatedOn
		if err := tx.Put(bucketAssignments, key(a.ID), old); err != nil {
			return old, false, err
		}
		return old, false, nil
	case !errors.Is(err, store.ErrNotFound):
		return old, false, err
	}
	dup := false
	err = forPrincipal(tx, a.PrincipalID, func(b Assignment) error {
		if sameGrant(a, b) {
			dup = true
		}
		return nil
	})
	if err != nil {
		return a, false, err
	}
	if dup {
		return a, false, fmt.Errorf("put role assignment %s: %w", a.Name, ErrExists)
	}
	if err := tx.Put(bucketAssignments, key(a.ID), a); err != nil {
		return a, false, err
	}
	if err := tx.Put(bucketByPrincipal, key(a.PrincipalID)+"/"+key(a.ID), grant{ID: a.ID, ScopeKey: scopeKey(a.Scope), Role: a.RoleDefinitionID}); err != nil {
		return a, false, err
	}
	return a, true, nil
}

// GetTx returns the assignment with this id, or ErrNotFound.
func GetTx(tx *store.Tx, id string) (Assignment, error) {
	var a Assignment
	err := tx.Get(bucketAssignments, key(id), &a)
	return a, err
}

// DeleteTx removes the assignment with this id and returns it, or ErrNotFound.
func DeleteTx(tx *store.Tx, id string) (Assignment, error) {
	a, err := GetTx(tx, id)
	if err != nil {
		return a, err
	}
	if err := tx.Delete(bucketAssignments, key(id)); err != nil {
		return a, err
	}
	return a, tx.Delete(bucketByPrincipal, key(a.PrincipalID)+"/"+key(id))
}

// DeleteUnderTx removes every assignment at scope or below it (a deleted resource group or
// resource takes its assignments with it).
func DeleteUnderTx(tx *store.Tx, scope string) error {
	var ids []string
	err := tx.ForEach(bucketAssignments, key(strings.TrimSuffix(scope, "/"))+"/", func(_ string, decode func(any) error) error {
		var a Assignment
		if err := decode(&a); err != nil {
			return err
		}
		ids = append(ids, a.ID)
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := DeleteTx(tx, id); err != nil {
			return fmt.Errorf("delete role assignment: %w", err)
		}
	}
	return nil
}

// grant is what the principal index keeps of an assignment: enough to answer an access check,
// which every ARM and Key Vault call makes, without reading the assignment itself.
type grant struct {
	ID       string `json:"id"`
	ScopeKey string `json:"scopeKey"` // the scope in lower case without a trailing slash
	Role     string `json:"role"`
}

// forPrincipalGrants calls fn for each of the principal's grants.
func forPrincipalGrants(tx *store.Tx, principalID string, fn func(grant) error) error {
	if principalID == "" {
		return nil
	}
	return tx.ForEach(bucketByPrincipal, key(principalID)+"/", func(_ string, decode func(any) error) error {
		var g grant
		if err := decode(&g); err != nil {
			return err
		}
		return fn(g)
	})
}

// forPrincipal calls fn for each of the principal's assignments.
func forPrincipal(tx *store.Tx, principalID string, fn func(Assignment) error) error {
	return forPrincipalGrants(tx, principalID, func(g grant) error {
		a, err := GetTx(tx, g.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		return fn(a)
	})
}

// Filter selects assignments for List.
type Filter struct {
	PrincipalID string // only this principal's
	AtScope     bool   // only at the scope or above it (atScope()); otherwise also below
}

// ListTx returns the assignments that apply at scope (at it or above it) and, unless
// f.AtScope, those below it, in id order.
func ListTx(tx *store.Tx, scope string, f Filter) ([]Assignment, error) {
	out := []Assignment{}
	keep := func(a Assignment) {
		above := scopeContains(a.Scope, scope)
		below := scopeContains(scope, a.Scope)
		if above || (below && !f.AtScope) {
			out = append(out, a)
		}
	}
	if f.PrincipalID != "" {
		err := forPrincipal(tx, f.PrincipalID, func(a Assignment) error { keep(a); return nil })
		return out, err
	}
	err := tx.ForEach(bucketAssignments, "", func(_ string, decode func(any) error) error {
		var a Assignment
		if err := decode(&a); err != nil {
			return err
		}
		keep(a)
		return nil
	})
	return out, err
}

// scopeContains reports whether scope covers target: the root, the same scope, or above it.
func scopeContains(scope, target string) bool {
	return keyContains(scopeKey(scope), scopeKey(target))
}

// scopeKey is the form scopes are compared in: lower case, no trailing slash.
func scopeKey(scope string) string { return strings.ToLower(strings.TrimSuffix(scope, "/")) }

// keyContains reports whether the scope key covers the target key (itself or below it).
func keyContains(scope, target string) bool {
	return scope == "" || target == scope || (strings.HasPrefix(target, scope) && target[len(scope)] == '/')
}

// Authorizer answers access checks from the assignments in a store.
type Authorizer struct{ st *store.Store }

// New returns an authorizer over st.
func New(st *store.Store) *Authorizer { return &Authorizer{st: st} }

// Check returns nil if one of the principal's assignments at scope or above grants the
// control-plane action, ErrDenied if none does.
func (a *Authorizer) Check(ctx context.Context, principalID, action, scope string) error {
	_, err := a.Explain(ctx, principalID, action, scope, false)
	return err
}

// CheckData is Check for a data-plane action (Key Vault secrets).
func (a *Authorizer) CheckData(ctx context.Context, principalID, dataAction, scope string) error {
	_, err := a.Explain(ctx, principalID, dataAction, scope, true)
	return err
}

// Explain is Check (data: CheckData) that also returns the assignment granting the action: the
// one decision both the services and the web view's "check access" use.
func (a *Authorizer) Explain(ctx context.Context, principalID, action, scope string, data bool) (Assignment, error) {
	grants := func(r RoleDefinition) bool { return r.Allows(action) }
	if data {
		grants = func(r RoleDefinition) bool { return r.AllowsData(action) }
	}
	errFound := errors.New("found")
	target := scopeKey(scope)
	var found Assignment
	err := a.st.View(ctx, func(tx *store.Tx) error {
		return forPrincipalGrants(tx, principalID, func(g grant) error {
			if !keyContains(g.ScopeKey, target) {
				return nil
			}
			if r, ok := RoleByID(g.Role); ok && grants(r) {
				as, err := GetTx(tx, g.ID)
				if err != nil {
					return err
				}
				found = as
				return errFound
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, errFound):
		return found, nil
	case err != nil:
		return Assignment{}, fmt.Errorf("check role assignments: %w", err)
	}
	return Assignment{}, ErrDenied
}

// Effective is the principal's assignments that apply at scope (at it or above it), each with
// its role: what the principal may do there, and why.
func (a *Authorizer) Effective(ctx context.Context, principalID, scope string) ([]Assignment, error) {
	var out []Assignment
	err := a.st.View(ctx, func(tx *store.Tx) error {
		var err error
		out, err = ListTx(tx, scope, Filter{PrincipalID: principalID, AtScope: true})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list role assignments: %w", err)
	}
	return out, nil
}

// Ensure creates the assignment unless the same grant exists (under any name): for assignments
// the cloud makes itself, such as the bootstrap principal's Owner.
func (a *Authorizer) Ensure(ctx context.Context, as Assignment) error {
	exists := false
	err := a.st.View(ctx, func(tx *store.Tx) error {
		return forPrincipal(tx, as.PrincipalID, func(b Assignment) error {
			exists = exists || sameGrant(as, b)
			return nil
		})
	})
	if err != nil || exists {
		return err // nothing to write on every start
	}
	err = a.st.Update(ctx, func(tx *store.Tx) error {
		_, _, err := PutTx(tx, as)
		return err
	})
	if err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("ensure role assignment: %w", err)
	}
	return nil
}

// Store is the state the authorizer reads, for callers that combine assignment changes with
// their own writes in one transaction.
func (a *Authorizer) Store() *store.Store { return a.st }

// DeniedReason says in words why Explain refused the action: nothing the principal holds at
// scope or above grants it, and what it does hold (every scope), for the request log.
func (a *Authorizer) DeniedReason(ctx context.Context, principalID, action, scope string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "No role assignment of principal %s grants %q at scope %q or above.", principalID, action, scope)
	var held []Assignment
	err := a.st.View(ctx, func(tx *store.Tx) error {
		var err error
		held, err = ListTx(tx, "/", Filter{PrincipalID: principalID})
		return err
	})
	switch {
	case err != nil:
		return b.String()
	case len(held) == 0:
		b.WriteString(" It holds no role assignments.")
		return b.String()
	}
	b.WriteString(" It holds:")
	for i, as := range held {
		name := RoleIDFromDefinitionID(as.RoleDefinitionID)
		if r, ok := RoleByID(name); ok {
			name = r.RoleName
		}
		sep := ";"
		if i == len(held)-1 {
			sep = "."
		}
		fmt.Fprintf(&b, " %s at %q%s", name, as.Scope, sep)
	}
	return b.String()
}
