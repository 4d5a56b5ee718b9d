// Package authorization is the Microsoft.Authorization provider of the local cloud: role
// assignments at any scope (subscription, resource group, resource) and the built-in role
// definitions. The assignments are authz's; this package is their ARM face.
package authorization

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	AssignmentType = "Microsoft.Authorization/roleAssignments"
	DefinitionType = "Microsoft.Authorization/roleDefinitions"
)

// API versions: armauthorization/v2, ASO and the az CLI send 2022-04-01; older SDKs and the
// JavaScript SDK's earlier majors send the others.
var (
	AssignmentVersions = []string{
		"2015-07-01", "2017-10-01-preview", "2018-01-01-preview", "2018-09-01-preview", "2020-03-01-preview", "2020-04-01-preview",
		"2020-08-01-preview", "2020-10-01-preview", "2021-04-01-preview", "2022-01-01-preview", "2022-04-01",
	}
	DefinitionVersions = []string{"2015-07-01", "2018-01-01-preview", "2022-04-01", "2022-05-01-preview"}
)

// Provider serves Microsoft.Authorization.
type Provider struct {
	svc *arm.Service
	dir *entra.Directory
}

// Register adds the provider's types and routes to svc; dir is checked for assigned principals.
func Register(svc *arm.Service, dir *entra.Directory) *Provider {
	p := &Provider{svc: svc, dir: dir}
	svc.RegisterType(arm.Type{Name: AssignmentType, APIVersions: AssignmentVersions})
	svc.RegisterType(arm.Type{Name: DefinitionType, APIVersions: DefinitionVersions})
	const (
		rg  = "/subscriptions/{subscriptionId}/resourceGroups/rg-example"
		ras = rg + "/providers/Microsoft.Authorization/roleAssignments"
		rds = "/subscriptions/{subscriptionId}/providers/Microsoft.Authorization/roleDefinitions"
	)
	scope := func(r *arm.Request) string { return p.authzScope(r.ID) }
	for _, rt := range []arm.Route{
		{Method: http.MethodGet, Type: AssignmentType, Collection: true, Action: "Microsoft.Authorization/roleAssignments/read", Scope: scope, Handle: p.listAssignments, Example: ras},
		{Method: http.MethodPut, Type: AssignmentType, Action: "Microsoft.Authorization/roleAssignments/write", Scope: scope, Handle: p.putAssignment, Example: ras + "/11111111-1111-1111-1111-111111111111"},
		{Method: http.MethodGet, Type: AssignmentType, Action: "Microsoft.Authorization/roleAssignments/read", Scope: scope, Handle: p.getAssignment, Example: ras + "/11111111-1111-1111-1111-111111111111"},
		{Method: http.MethodDelete, Type: AssignmentType, Action: "Microsoft.Authorization/roleAssignments/delete", Scope: scope, Handle: p.deleteAssignment, Example: ras + "/11111111-1111-1111-1111-111111111111"},
		{Method: http.MethodGet, Type: DefinitionType, Collection: true, Action: "Microsoft.Authorization/roleDefinitions/read", Scope: scope, Handle: p.listDefinitions, Example: rds},
		{Method: http.MethodGet, Type: DefinitionType, Action: "Microsoft.Authorization/roleDefinitions/read", Scope: scope, Handle: p.getDefinition, Example: rds + "/" + authz.Reader},
	} {
		svc.Handle(rt)
	}
	return p
}

// authzScope is where an Authorization route is checked: the scope the assignment or definition
// sits at (the root is checked at the subscription, see arm.Service.ScopeOf).
func (p *Provider) authzScope(id armid.ID) string {
	s := id.Scope()
	if s.IsRoot() {
		return "/subscriptions/" + p.svc.SubscriptionID()
	}
	return s.String()
}

// Role assignments.

type assignmentProperties struct {
	RoleDefinitionID string `json:"roleDefinitionId"`
	PrincipalID      string `json:"principalId"`
	PrincipalType    string `json:"principalType,omitempty"`
	Scope            string `json:"scope,omitempty"`
	Description      string `json:"description,omitempty"`
	Condition        string `json:"condition,omitempty"`
	ConditionVersion string `json:"conditionVersion,omitempty"`
	CreatedOn        string `json:"createdOn,omitempty"`
	UpdatedOn        string `json:"updatedOn,omitempty"`
	CreatedBy        string `json:"createdBy,omitempty"`
	UpdatedBy        string `json:"updatedBy,omitempty"`
}

type assignmentJSON struct {
	ID         string               `json:"id"`
	Name       string               `json:"name"`
	Type       string               `json:"type"`
	Properties assignmentProperties `json:"properties"`
}

func (p *Provider) definitionID(roleID string) string {
	return "/subscriptions/" + p.svc.SubscriptionID() + "/providers/Microsoft.Authorization/roleDefinitions/" + roleID
}

func (p *Provider) assignmentView(a authz.Assignment) assignmentJSON {
	const ts = "2006-01-02T15:04:05.0000000Z"
	return assignmentJSON{ID: a.ID, Name: a.Name, Type: AssignmentType, Properties: assignmentProperties{
		RoleDefinitionID: p.definitionID(a.RoleDefinitionID), PrincipalID: a.PrincipalID, PrincipalType: a.PrincipalType,
		Scope: a.Scope, Description: a.Description, Condition: a.Condition, ConditionVersion: a.ConditionVersion,
		CreatedOn: a.CreatedOn.UTC().Format(ts), UpdatedOn: a.UpdatedOn.UTC().Format(ts), CreatedBy: a.CreatedBy, UpdatedBy: a.UpdatedBy,
	}}
}

var principalTypes = map[string]bool{"User": true, "Group": true, "ServicePrincipal": true, "ForeignGroup": true, "Device": true}

func (p *Provider) putAssignment(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	name := r.ID.Name()
	if _, err := uuid.Parse(name); err != nil || len(name) != 36 {
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "InvalidRoleAssignmentId",
			"The role assignment ID '%s' is not valid. The role assignment ID must be a GUID.", name[:min(len(name), 64)])
	}
	scope := r.ID.Scope()
	if scope.IsRoot() {
		return httpx.Response{}, arm.ErrBadRequest("Role assignments at the root scope are not supported by the local cloud.")
	}
	var body struct {
		Properties assignmentProperties `json:"properties"`
	}
	if err := r.Decode(&body); err != nil {
		return httpx.Response{}, err
	}
	in := body.Properties
	roleID := authz.RoleIDFromDefinitionID(in.RoleDefinitionID)
	role, ok := authz.RoleByID(roleID)
	if !ok {
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "RoleDefinitionDoesNotExist",
			"The specified role definition with ID '%s' does not exist.", in.RoleDefinitionID[:min(len(in.RoleDefinitionID), 256)])
	}
	if _, err := uuid.Parse(in.PrincipalID); err != nil {
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "InvalidPrincipalId", "The principal ID '%s' is not valid. It must be a GUID.", in.PrincipalID[:min(len(in.PrincipalID), 64)])
	}
	if in.PrincipalType != "" && !principalTypes[in.PrincipalType] {
		return httpx.Response{}, arm.ErrBadRequest("The principalType '%s' is not valid.", in.PrincipalType[:min(len(in.PrincipalType), 32)])
	}
	if len(in.Description) > 2048 || len(in.Condition) > 8192 {
		return httpx.Response{}, arm.ErrBadRequest("The description or condition is too long.")
	}
	now := p.svc.Now().UTC()
	a := authz.Assignment{
		ID: authz.AssignmentID(scope.String(), name), Name: name, Scope: scope.String(), RoleDefinitionID: role.ID,
		PrincipalID: strings.ToLower(in.PrincipalID), PrincipalType: "ServicePrincipal", Description: in.Description,
		Condition: in.Condition, ConditionVersion: in.ConditionVersion,
		CreatedBy: r.Caller.ObjectID, CreatedOn: now, UpdatedBy: r.Caller.ObjectID, UpdatedOn: now,
	}
	var out authz.Assignment
	created := false
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		ok, err := p.svc.ExistsTx(tx, scope)
		if err != nil {
			return err
		}
		if !ok {
			if scope.ResourceGroup() != "" && len(scope.Segments) == 2 {
				return arm.ErrResourceGroupNotFound(scope.ResourceGroup())
			}
			return arm.ErrNotFound(scope)
		}
		if _, err := p.dir.PrincipalByObjectIDTx(tx, p.svc.TenantID(), a.PrincipalID); errors.Is(err, entra.ErrNotFound) {
			return arm.Errorf(http.StatusBadRequest, "PrincipalNotFound",
				"Principal %s does not exist in the directory %s. Check that you have the correct principal ID.", a.PrincipalID, p.svc.TenantID())
		} else if err != nil {
			return err
		}
		if in.PrincipalType != "" && in.PrincipalType != "ServicePrincipal" {
			return arm.Errorf(http.StatusBadRequest, "UnmatchedPrincipalType", "The PrincipalId '%s' has type 'ServicePrincipal', which is different from specified PrincipalType '%s'.", a.PrincipalID, in.PrincipalType)
		}
		out, created, err = authz.PutTx(tx, a)
		return err
	})
	switch {
	case errors.Is(err, authz.ErrExists):
		return httpx.Response{}, arm.Errorf(http.StatusConflict, "RoleAssignmentExists", "The role assignment already exists.")
	case errors.Is(err, authz.ErrUpdateNotPermitted):
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "RoleAssignmentUpdateNotPermitted",
			"Tenant ID, application ID, principal ID, and scope are not allowed to be updated.")
	case err != nil:
		return httpx.Response{}, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return httpx.Response{Status: status, Body: p.assignmentView(out)}, nil
}

func errAssignmentNotFound(name string) *arm.Error {
	return arm.Errorf(http.StatusNotFound, "RoleAssignmentNotFound", "The role assignment '%s' is not found.", name[:min(len(name), 64)])
}

func (p *Provider) getAssignment(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var a authz.Assignment
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		a, err = authz.GetTx(tx, r.ID.String())
		return err
	})
	if errors.Is(err, authz.ErrNotFound) {
		return httpx.Response{}, errAssignmentNotFound(r.ID.Name())
	} else if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.assignmentView(a)}, nil
}

func (p *Provider) deleteAssignment(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var a authz.Assignment
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		var err error
		a, err = authz.DeleteTx(tx, r.ID.String())
		return err
	})
	if errors.Is(err, authz.ErrNotFound) {
		return httpx.Response{Status: http.StatusNoContent}, nil
	} else if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.assignmentView(a)}, nil
}

type list[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

var (
	principalFilter = regexp.MustCompile(`(?i)^principalId\s+eq\s+'([0-9a-fA-F-]{36})'$`)
	assignedTo      = regexp.MustCompile(`(?i)^assignedTo\('([0-9a-fA-F-]{36})'\)$`)
	atScope         = regexp.MustCompile(`(?i)^atScope\(\)$`)
	roleNameFilter  = regexp.MustCompile(`(?i)^roleName\s+eq\s+'([^']{1,256})'$`)
	typeFilter      = regexp.MustCompile(`(?i)^type\s+eq\s+'([^']{1,64})'$`)
	andSplit        = regexp.MustCompile(`(?i)\s+and\s+`)
)

// ParseAssignmentFilter parses the $filter of a role-assignment list: atScope(),
// principalId eq '{id}' and assignedTo('{id}'), joined by "and".
func ParseAssignmentFilter(q string) (authz.Filter, error) {
	var f authz.Filter
	q = strings.TrimSpace(q)
	if q == "" {
		return f, nil
	}
	if len(q) > 512 {
		return f, errFilter()
	}
	for _, term := range andSplit.Split(q, -1) {
		term = strings.TrimSpace(term)
		switch {
		case atScope.MatchString(term):
			f.AtScope = true
		case principalFilter.MatchString(term):
			f.PrincipalID = strings.ToLower(principalFilter.FindStringSubmatch(term)[1])
		case assignedTo.MatchString(term):
			f.PrincipalID = strings.ToLower(assignedTo.FindStringSubmatch(term)[1])
		default:
			return f, errFilter()
		}
	}
	return f, nil
}

func errFilter() *arm.Error {
	return arm.Errorf(http.StatusBadRequest, "UnsupportedQuery", "The $filter is not supported. Supported: atScope(), principalId eq '{id}', assignedTo('{id}'), roleName eq '{name}', type eq 'BuiltInRole'.")
}

func (p *Provider) listAssignments(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	f, err := ParseAssignmentFilter(r.HTTP.URL.Query().Get("$filter"))
	if err != nil {
		return httpx.Response{}, err
	}
	scope := r.ID.Scope().String()
	var all []authz.Assignment
	err = p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		all, err = authz.ListTx(tx, scope, f)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	out := list[assignmentJSON]{Value: []assignmentJSON{}}
	for _, a := range all {
		out.Value = append(out.Value, p.assignmentView(a))
	}
	return httpx.Response{Body: out}, nil
}

// Role definitions.

type definitionJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Properties struct {
		RoleName         string             `json:"roleName"`
		Type             string             `json:"type"`
		Description      string             `json:"description"`
		AssignableScopes []string           `json:"assignableScopes"`
		Permissions      []authz.Permission `json:"permissions"`
		CreatedOn        string             `json:"createdOn"`
		UpdatedOn        string             `json:"updatedOn"`
	} `json:"properties"`
}

func definitionView(scope armid.ID, d authz.RoleDefinition) definitionJSON {
	prefix := ""
	if sub := scope.Subscription(); sub != "" {
		prefix = "/subscriptions/" + sub
	}
	v := definitionJSON{ID: prefix + "/providers/Microsoft.Authorization/roleDefinitions/" + d.ID, Name: d.ID, Type: DefinitionType}
	v.Properties.RoleName, v.Properties.Type, v.Properties.Description = d.RoleName, d.RoleType, d.Description
	v.Properties.AssignableScopes, v.Properties.Permissions = d.AssignableScopes, d.Permissions
	v.Properties.CreatedOn, v.Properties.UpdatedOn = "2015-02-02T21:55:09.8806423Z", "2025-01-01T00:00:00.0000000Z"
	return v
}

func (p *Provider) getDefinition(_ context.Context, r *arm.Request) (httpx.Response, error) {
	d, ok := authz.RoleByID(r.ID.Name())
	if !ok {
		return httpx.Response{}, arm.Errorf(http.StatusNotFound, "RoleDefinitionDoesNotExist", "The specified role definition with ID '%s' does not exist.", r.ID.Name()[:min(len(r.ID.Name()), 64)])
	}
	return httpx.Response{Body: definitionView(r.ID.Scope(), d)}, nil
}

func (p *Provider) listDefinitions(_ context.Context, r *arm.Request) (httpx.Response, error) {
	var name, typ string
	if q := strings.TrimSpace(r.HTTP.URL.Query().Get("$filter")); q != "" {
		if len(q) > 512 {
			return httpx.Response{}, errFilter()
		}
		for _, term := range andSplit.Split(q, -1) {
			term = strings.TrimSpace(term)
			switch {
			case roleNameFilter.MatchString(term):
				name = roleNameFilter.FindStringSubmatch(term)[1]
			case typeFilter.MatchString(term):
				typ = typeFilter.FindStringSubmatch(term)[1]
			default:
				return httpx.Response{}, errFilter()
			}
		}
	}
	out := list[definitionJSON]{Value: []definitionJSON{}}
	for _, d := range authz.BuiltIns() {
		if name != "" && !strings.EqualFold(d.RoleName, name) || typ != "" && !strings.EqualFold(d.RoleType, typ) {
			continue
		}
		out.Value = append(out.Value, definitionView(r.ID.Scope(), d))
	}
	return httpx.Response{Body: out}, nil
}
