package compute

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// AssignAction is what a caller needs on a user-assigned identity to put it on a resource
// (Managed Identity Operator, Contributor and Owner grant it).
const AssignAction = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"

const identityType = "Microsoft.ManagedIdentity/userAssignedIdentities"

// identity is a resource's stored identity. The system-assigned principal's client id is kept
// (ARM does not show it) so the managed-identity endpoints can find the principal.
type identity struct {
	System       bool           `json:"system,omitempty"`
	PrincipalID  string         `json:"principalId,omitempty"`
	TenantID     string         `json:"tenantId,omitempty"`
	ClientID     string         `json:"clientId,omitempty"`
	UserAssigned []userAssigned `json:"userAssigned,omitempty"`
}

// userAssigned is one assigned user-assigned identity, with the ids it had when assigned.
type userAssigned struct {
	ID          string `json:"id"` // creation case
	PrincipalID string `json:"principalId"`
	ClientID    string `json:"clientId"`
	TenantID    string `json:"tenantId"`
}

func (i *identity) typeName() string {
	switch {
	case i == nil || (!i.System && len(i.UserAssigned) == 0):
		return "None"
	case i.System && len(i.UserAssigned) > 0:
		return "SystemAssigned, UserAssigned"
	case i.System:
		return "SystemAssigned"
	}
	return "UserAssigned"
}

func (i *identity) has(id string) bool {
	return i != nil && slices.ContainsFunc(i.UserAssigned, func(u userAssigned) bool { return strings.EqualFold(u.ID, id) })
}

// identityBody is the request's identity. A null value in userAssignedIdentities removes that
// identity in a PATCH.
type identityBody struct {
	Type                   *string                     `json:"type"`
	UserAssignedIdentities map[string]*json.RawMessage `json:"userAssignedIdentities"`
}

// parseType reads "SystemAssigned", "UserAssigned", "SystemAssigned, UserAssigned" or "None",
// case-insensitively and with or without spaces.
func parseType(s string) (system, user bool, err error) {
	parts := strings.Split(s, ",")
	for _, p := range parts {
		switch strings.ToLower(strings.TrimSpace(p)) {
		case "systemassigned":
			system = true
		case "userassigned":
			user = true
		case "none":
			if len(parts) != 1 {
				return false, false, errIdentityType(s)
			}
		default:
			return false, false, errIdentityType(s)
		}
	}
	return system, user, nil
}

func errIdentityType(s string) error {
	return arm.Errorf(http.StatusBadRequest, "InvalidIdentityType",
		"The identity type '%s' is invalid. Allowed values are 'SystemAssigned', 'UserAssigned', 'SystemAssigned, UserAssigned' and 'None'.", clip(s, 64))
}

// plan is the identity a request asks for: the flags and the user-assigned ids, validated but
// not yet resolved against the store.
type plan struct {
	system bool
	user   []armid.ID
}

// planIdentity computes the wanted identity from the current one and the request; merge is a
// PATCH (absent identity keeps the current one; null entries remove, others add).
func (p *Provider) planIdentity(cur *identity, body *identityBody, merge bool) (plan, error) {
	var out plan
	if body == nil {
		if merge && cur != nil {
			out.system = cur.System
			for _, u := range cur.UserAssigned {
				id, _ := armid.Parse(u.ID)
				out.user = append(out.user, id)
			}
		}
		return out, nil
	}
	var user bool
	typeGiven := body.Type != nil
	switch {
	case typeGiven:
		var err error
		if out.system, user, err = parseType(*body.Type); err != nil {
			return plan{}, err
		}
	case merge && cur != nil:
		out.system = cur.System
	default:
		return plan{}, arm.Errorf(http.StatusBadRequest, "InvalidIdentityType", "The identity type is required.")
	}
	wanted := map[string]armid.ID{}
	var order []string
	add := func(id armid.ID) {
		if _, ok := wanted[id.Key()]; !ok {
			order = append(order, id.Key())
		}
		wanted[id.Key()] = id
	}
	if merge && cur != nil {
		for _, u := range cur.UserAssigned {
			id, _ := armid.Parse(u.ID)
			add(id)
		}
	}
	adds := false
	for raw, v := range body.UserAssignedIdentities {
		id, err := p.parseIdentityID(raw)
		if err != nil {
			return plan{}, err
		}
		if v == nil || string(*v) == "null" {
			delete(wanted, id.Key())
			continue
		}
		adds = true
		add(id)
	}
	if !typeGiven {
		user = len(wanted) > 0
	}
	if !user {
		if adds {
			return plan{}, arm.Errorf(http.StatusBadRequest, "InvalidIdentityValues",
				"The 'userAssignedIdentities' property can only be set when the identity type includes 'UserAssigned'.")
		}
		return out, nil
	}
	slices.Sort(order)
	for _, k := range order {
		if id, ok := wanted[k]; ok {
			out.user = append(out.user, id)
		}
	}
	if len(out.user) == 0 {
		return plan{}, arm.Errorf(http.StatusBadRequest, "InvalidIdentityValues",
			"The identity type 'UserAssigned' requires at least one entry in 'userAssignedIdentities'.")
	}
	return out, nil
}

// parseIdentityID checks that a key of userAssignedIdentities is a user-assigned identity's id
// in the cloud's subscription.
func (p *Provider) parseIdentityID(raw string) (armid.ID, error) {
	id, err := armid.Parse(raw)
	if err != nil || id.IsCollection() || len(id.Segments) != 3 || id.ResourceGroup() == "" ||
		!strings.EqualFold(id.ResourceType(), identityType) || !strings.EqualFold(id.Subscription(), p.svc.SubscriptionID()) {
		return armid.ID{}, arm.Errorf(http.StatusBadRequest, "InvalidIdentityValues",
			"The user-assigned identity '%s' is not the resource id of a Microsoft.ManagedIdentity/userAssignedIdentities in this subscription.", clip(raw, 256))
	}
	return id, nil
}

// added are the user-assigned identities of next that cur does not have.
func added(cur *identity, next plan) []armid.ID {
	var out []armid.ID
	for _, id := range next.user {
		if !cur.has(id.String()) {
			out = append(out, id)
		}
	}
	return out
}

// checkAssign is ARM's linked access check: putting a user-assigned identity on a resource
// needs the assign action on that identity. It runs before the write transaction (the
// authorizer reads the store in its own).
func (p *Provider) checkAssign(ctx context.Context, r *arm.Request, write string, ids []armid.ID) error {
	var denied []string
	for _, id := range ids {
		err := p.svc.Authz().Check(ctx, r.Caller.ObjectID, AssignAction, id.String())
		switch {
		case errors.Is(err, authz.ErrDenied):
			denied = append(denied, id.String())
		case err != nil:
			return err
		}
	}
	if len(denied) == 0 {
		return nil
	}
	return arm.Errorf(http.StatusForbidden, "LinkedAuthorizationFailed",
		"The client '%s' with object id '%s' has permission to perform action '%s' on scope '%s'; however, it does not have permission to perform action(s) '%s' on the linked scope(s) '%s' (respectively) or the linked scope(s) are invalid.",
		r.Caller.AppID, r.Caller.ObjectID, write, clip(r.ID.String(), 512), AssignAction, clip(strings.Join(denied, ","), 1024))
}

// applyTx makes the stored identity of resource id match next: it creates or deletes the
// system-assigned principal and resolves each user-assigned identity. checked are the identities
// the caller was authorized to add; one added since the check was made is a conflict.
func (p *Provider) applyTx(tx *store.Tx, id armid.ID, cur *identity, next plan, checked []armid.ID) (*identity, error) {
	out := &identity{}
	switch {
	case next.system && cur != nil && cur.System:
		out.System, out.PrincipalID, out.TenantID, out.ClientID = true, cur.PrincipalID, cur.TenantID, cur.ClientID
	case next.system:
		pr, err := p.dir.CreatePrincipalTx(tx, entra.Principal{
			TenantID: p.svc.TenantID(), Kind: entra.KindManagedIdentity, DisplayName: id.Name(), ResourceID: id.String(),
		})
		if err != nil {
			return nil, err
		}
		out.System, out.PrincipalID, out.TenantID, out.ClientID = true, pr.ObjectID, pr.TenantID, pr.ClientID
	case cur != nil && cur.System:
		if err := p.dir.DeletePrincipalTx(tx, cur.TenantID, cur.ClientID); err != nil {
			return nil, err
		}
	}
	for _, uid := range next.user {
		if cur.has(uid.String()) {
			for _, u := range cur.UserAssigned {
				if strings.EqualFold(u.ID, uid.String()) {
					out.UserAssigned = append(out.UserAssigned, u)
				}
			}
			continue
		}
		if !slices.ContainsFunc(checked, func(c armid.ID) bool { return c.Key() == uid.Key() }) {
			return nil, arm.Errorf(http.StatusConflict, "AnotherOperationInProgress", "The resource was changed by another operation; retry the request.")
		}
		res, err := arm.GetTx(tx, uid)
		if arm.IsNotFound(err) {
			return nil, arm.Errorf(http.StatusBadRequest, "FailedIdentityOperation", "Identity '%s' was not found.", clip(uid.String(), 512))
		} else if err != nil {
			return nil, err
		}
		var props struct {
			TenantID    string `json:"tenantId"`
			PrincipalID string `json:"principalId"`
			ClientID    string `json:"clientId"`
		}
		if err := json.Unmarshal(res.Properties, &props); err != nil {
			return nil, err
		}
		out.UserAssigned = append(out.UserAssigned, userAssigned{ID: res.ID, PrincipalID: props.PrincipalID, ClientID: props.ClientID, TenantID: props.TenantID})
	}
	if !out.System && len(out.UserAssigned) == 0 {
		return nil, nil
	}
	return out, nil
}

// identityJSON is the identity as ARM shows it.
type identityJSON struct {
	Type                   string                      `json:"type"`
	PrincipalID            string                      `json:"principalId,omitempty"`
	TenantID               string                      `json:"tenantId,omitempty"`
	UserAssignedIdentities map[string]userAssignedJSON `json:"userAssignedIdentities,omitempty"`
}

type userAssignedJSON struct {
	PrincipalID string `json:"principalId"`
	ClientID    string `json:"clientId"`
}

func (i *identity) view() *identityJSON {
	if i == nil {
		return nil
	}
	v := &identityJSON{Type: i.typeName(), PrincipalID: i.PrincipalID, TenantID: i.TenantID}
	if len(i.UserAssigned) > 0 {
		v.UserAssignedIdentities = map[string]userAssignedJSON{}
		for _, u := range i.UserAssigned {
			v.UserAssignedIdentities[u.ID] = userAssignedJSON{PrincipalID: u.PrincipalID, ClientID: u.ClientID}
		}
	}
	return v
}

// Principal names a principal of the cloud's Entra ID.
type Principal struct {
	TenantID, ClientID, ObjectID string
	ResourceID                   string // a user-assigned identity's id; "" for the system-assigned one
}

// Assigned are the identities a compute resource may get tokens for.
type Assigned struct {
	ResourceID   string     // the compute resource, in creation case
	System       *Principal // nil without a system-assigned identity
	UserAssigned []Principal
}

// AssignedTx returns the identities assigned to the virtual machine or scale set id, or a 404
// *arm.Error if there is no such resource.
func AssignedTx(tx *store.Tx, id armid.ID) (Assigned, error) {
	if err := CheckComputeID(id); err != nil {
		return Assigned{}, err
	}
	res, err := arm.GetTx(tx, id)
	if err != nil {
		return Assigned{}, err
	}
	var st stored
	if err := json.Unmarshal(res.Properties, &st); err != nil {
		return Assigned{}, err
	}
	out := Assigned{ResourceID: res.ID}
	if i := st.Identity; i != nil {
		if i.System {
			out.System = &Principal{TenantID: i.TenantID, ClientID: i.ClientID, ObjectID: i.PrincipalID}
		}
		for _, u := range i.UserAssigned {
			out.UserAssigned = append(out.UserAssigned, Principal{TenantID: u.TenantID, ClientID: u.ClientID, ObjectID: u.PrincipalID, ResourceID: u.ID})
		}
	}
	return out, nil
}

// CheckComputeID returns nil if id names a virtual machine or a scale set (not a collection).
func CheckComputeID(id armid.ID) error {
	t := id.ResourceType()
	if id.IsCollection() || len(id.Segments) != 3 || id.ResourceGroup() == "" ||
		(!strings.EqualFold(t, VirtualMachineType) && !strings.EqualFold(t, ScaleSetType)) {
		return arm.Errorf(http.StatusBadRequest, "InvalidResourceId",
			"'%s' is not the id of a Microsoft.Compute/virtualMachines or Microsoft.Compute/virtualMachineScaleSets resource.", clip(id.String(), 256))
	}
	return nil
}
