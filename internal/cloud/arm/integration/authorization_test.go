package integration_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

func TestRoleAssignments(t *testing.T) {
	e := start(t)
	c := e.clients(t, e.cred)
	ctx := t.Context()
	if _, err := c.groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	mi, err := c.identities.CreateOrUpdate(ctx, "rg", "app", armmsi.Identity{Location: ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := mi.Properties.PrincipalID
	sub := "/subscriptions/" + e.s.SubscriptionID
	create := func(scope, name, role string) (armauthorization.RoleAssignmentsClientCreateResponse, error) {
		return c.assignments.Create(ctx, scope, name, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: ptr(e.roleDefID(role)), PrincipalID: pid, PrincipalType: ptr(armauthorization.PrincipalTypeServicePrincipal),
		}}, nil)
	}
	// At every kind of scope.
	names := map[string]string{sub: uuid.NewString(), e.rgID("rg"): uuid.NewString(), *mi.ID: uuid.NewString()}
	for scope, name := range names {
		ra, err := create(scope, name, authz.Reader)
		if err != nil {
			t.Fatalf("create at %s: %v", scope, err)
		}
		if *ra.ID != scope+"/providers/Microsoft.Authorization/roleAssignments/"+name || *ra.Properties.Scope != scope ||
			*ra.Properties.PrincipalID != *pid || *ra.Properties.RoleDefinitionID != e.roleDefID(authz.Reader) {
			t.Errorf("assignment = %+v", ra.Properties)
		}
	}
	// The same grant under the same name is idempotent; under another name it is 409.
	if _, err := create(e.rgID("rg"), names[e.rgID("rg")], authz.Reader); err != nil {
		t.Fatalf("repeated PUT: %v", err)
	}
	_, err = create(e.rgID("rg"), uuid.NewString(), authz.Reader)
	cloudtest.RespErr(t, err, http.StatusConflict, "RoleAssignmentExists")
	_, err = create(e.rgID("rg"), names[e.rgID("rg")], authz.Contributor)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "RoleAssignmentUpdateNotPermitted")
	_, err = create(e.rgID("missing"), uuid.NewString(), authz.Reader)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceGroupNotFound")
	_, err = create(sub, uuid.NewString(), "00000000-0000-0000-0000-00000000beef")
	cloudtest.RespErr(t, err, http.StatusBadRequest, "RoleDefinitionDoesNotExist")
	_, err = c.assignments.Create(ctx, sub, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: ptr(e.roleDefID(authz.Reader)), PrincipalID: ptr(uuid.NewString()),
	}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "PrincipalNotFound")

	got, err := c.assignments.GetByID(ctx, *mi.ID+"/providers/Microsoft.Authorization/roleAssignments/"+names[*mi.ID], nil)
	if err != nil || *got.Name != names[*mi.ID] {
		t.Fatalf("get by id: %v %+v", err, got)
	}
	list := func(scope, filter string) []string {
		t.Helper()
		var out []string
		for pager := c.assignments.NewListForScopePager(scope, &armauthorization.RoleAssignmentsClientListForScopeOptions{Filter: ptr(filter)}); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatalf("list %s %q: %v", scope, filter, err)
			}
			for _, a := range page.Value {
				out = append(out, *a.Properties.Scope)
			}
		}
		return out
	}
	filter := "principalId eq '" + *pid + "'"
	if got := list(sub, filter); len(got) != 3 {
		t.Errorf("principal's assignments from the subscription: %v", got)
	}
	if got := list(e.rgID("rg"), "atScope() and "+filter); len(got) != 2 {
		t.Errorf("at the group and above: %v", got)
	}
	if got := list(*mi.ID, "atScope()"); len(got) != 4 { // + the bootstrap Owner at the subscription
		t.Errorf("at the identity and above: %v", got)
	}
	all := 0
	for pager := c.assignments.NewListForSubscriptionPager(nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all += len(page.Value)
	}
	if all != 4 {
		t.Errorf("subscription lists %d assignments, want 4", all)
	}
	if _, err := c.assignments.Delete(ctx, e.rgID("rg"), names[e.rgID("rg")], nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.assignments.Get(ctx, e.rgID("rg"), names[e.rgID("rg")], nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "RoleAssignmentNotFound")

	// Raw: a bad filter and a bad name.
	tok := cloudtest.Token(t, e.cred, armScope)
	st, h, body := e.do(t, http.MethodGet, sub+"/providers/Microsoft.Authorization/roleAssignments?api-version=2022-04-01&$filter=name%20eq%20'x'", tok, "")
	wantARMError(t, st, h, body, http.StatusBadRequest, "UnsupportedQuery")
	st, h, body = e.do(t, http.MethodPut, sub+"/providers/Microsoft.Authorization/roleAssignments/not-a-guid?api-version=2022-04-01", tok,
		`{"properties":{"roleDefinitionId":"`+e.roleDefID(authz.Reader)+`","principalId":"`+*pid+`"}}`)
	wantARMError(t, st, h, body, http.StatusBadRequest, "InvalidRoleAssignmentId")
}

// TestRoleAssignmentGrantsAndRevokes: what each built-in allows, checked through ARM.
func TestBuiltInRolesThroughARM(t *testing.T) {
	e := start(t)
	admin := e.clients(t, e.cred)
	ctx := t.Context()
	if _, err := admin.groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	p, cred := cloudtest.NewPrincipal(t, e.c, "worker")
	as := e.clients(t, cred)
	assign := func(role string) string {
		name := uuid.NewString()
		if _, err := admin.assignments.Create(ctx, e.rgID("rg"), name, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: ptr(e.roleDefID(role)), PrincipalID: ptr(p.ObjectID),
		}}, nil); err != nil {
			t.Fatal(err)
		}
		return name
	}
	raName := uuid.NewString()
	createRA := func() error {
		_, err := as.assignments.Create(ctx, e.rgID("rg"), raName, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: ptr(e.roleDefID(authz.Reader)), PrincipalID: ptr(p.ObjectID),
		}}, nil)
		return err
	}
	contrib := assign(authz.Contributor)
	if _, err := as.identities.CreateOrUpdate(ctx, "rg", "made-by-contributor", armmsi.Identity{Location: ptr("eastus")}, nil); err != nil {
		t.Fatalf("Contributor writes: %v", err)
	}
	cloudtest.RespErr(t, createRA(), http.StatusForbidden, "AuthorizationFailed") // Microsoft.Authorization/*/Write is a NotAction
	if _, err := admin.assignments.Delete(ctx, e.rgID("rg"), contrib, nil); err != nil {
		t.Fatal(err)
	}
	assign(authz.UserAccessAdministrator)
	if err := createRA(); err != nil {
		t.Fatalf("User Access Administrator assigns roles: %v", err)
	}
	_, err := as.identities.CreateOrUpdate(ctx, "rg", "uaa", armmsi.Identity{Location: ptr("eastus")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
}

func TestRoleDefinitions(t *testing.T) {
	e := start(t)
	c := e.clients(t, e.cred)
	ctx := t.Context()
	sub := "/subscriptions/" + e.s.SubscriptionID
	d, err := c.definitions.Get(ctx, sub, authz.Owner, nil)
	if err != nil || *d.Properties.RoleName != "Owner" || *d.ID != e.roleDefID(authz.Owner) || *d.Properties.Permissions[0].Actions[0] != "*" {
		t.Fatalf("get Owner: %v %+v", err, d)
	}
	d2, err := c.definitions.GetByID(ctx, "/providers/Microsoft.Authorization/roleDefinitions/"+authz.ManagedIdentityOperator, nil)
	if err != nil || *d2.Properties.RoleName != "Managed Identity Operator" {
		t.Fatalf("get by id: %v %+v", err, d2)
	}
	var got []string
	for pager := c.definitions.NewListPager(sub, &armauthorization.RoleDefinitionsClientListOptions{Filter: ptr("roleName eq 'Key Vault Secrets User'")}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Value {
			got = append(got, *d.Name)
		}
	}
	if strings.Join(got, ",") != authz.KeyVaultSecretsUser {
		t.Errorf("filtered by name: %v", got)
	}
	n := 0
	for pager := c.definitions.NewListPager(e.rgID("any"), nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != len(authz.BuiltIns()) {
		t.Errorf("listed %d definitions, want %d", n, len(authz.BuiltIns()))
	}
	_, err = c.definitions.Get(ctx, sub, "00000000-0000-0000-0000-00000000beef", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "RoleDefinitionDoesNotExist")
}
