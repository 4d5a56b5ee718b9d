package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

func TestUserAssignedIdentities(t *testing.T) {
	e := start(t)
	c := e.clients(t, e.cred)
	ctx := t.Context()
	_, err := c.identities.CreateOrUpdate(ctx, "rg", "app", armmsi.Identity{Location: ptr("eastus")}, nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceGroupNotFound")
	if _, err := c.groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	mi, err := c.identities.CreateOrUpdate(ctx, "rg", "App-1", armmsi.Identity{Location: ptr("eastus"), Tags: map[string]*string{"a": ptr("b")}}, nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	p := mi.Properties
	for _, v := range []*string{p.ClientID, p.PrincipalID, p.TenantID} {
		if v == nil || uuid.Validate(*v) != nil {
			t.Fatalf("service-made ids = %+v", p)
		}
	}
	wantID := e.rgID("rg") + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/App-1"
	if *p.TenantID != e.s.TenantID || *mi.ID != wantID || *mi.Type != "Microsoft.ManagedIdentity/userAssignedIdentities" {
		t.Errorf("identity = %+v", mi.Identity)
	}
	// It is a principal of the directory, carrying its resource id.
	pr, err := e.c.Entra().Directory.Principal(ctx, e.s.TenantID, *p.ClientID)
	if err != nil || pr.ObjectID != *p.PrincipalID || pr.Kind != entra.KindManagedIdentity || pr.ResourceID != wantID {
		t.Fatalf("principal = %+v, %v", pr, err)
	}
	// A repeated PUT keeps the ids; GET is case-insensitive and keeps the id's case.
	again, err := c.identities.CreateOrUpdate(ctx, "RG", "app-1", armmsi.Identity{Location: ptr("eastus")}, nil)
	if err != nil || *again.Properties.ClientID != *p.ClientID || *again.ID != wantID {
		t.Fatalf("second PUT: %v %+v", err, again)
	}
	_, err = c.identities.CreateOrUpdate(ctx, "rg", "app-1", armmsi.Identity{Location: ptr("westus")}, nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "InvalidResourceLocation")
	got, err := c.identities.Get(ctx, "rg", "APP-1", nil)
	if err != nil || *got.ID != wantID || *got.Properties.PrincipalID != *p.PrincipalID {
		t.Fatalf("get: %v %+v", err, got)
	}
	upd, err := c.identities.Update(ctx, "rg", "app-1", armmsi.IdentityUpdate{Tags: map[string]*string{"x": ptr("y")}}, nil)
	if err != nil || *upd.Tags["x"] != "y" {
		t.Fatalf("update: %v %+v", err, upd)
	}
	if _, err := c.identities.CreateOrUpdate(ctx, "rg", "other", armmsi.Identity{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	count := func(pager interface {
		More() bool
	}, next func() (int, error)) int {
		n := 0
		for pager.More() {
			k, err := next()
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			n += k
		}
		return n
	}
	rgPager := c.identities.NewListByResourceGroupPager("rg", nil)
	if n := count(rgPager, func() (int, error) { pg, err := rgPager.NextPage(ctx); return len(pg.Value), err }); n != 2 {
		t.Errorf("listed %d identities in the group, want 2", n)
	}
	subPager := c.identities.NewListBySubscriptionPager(nil)
	if n := count(subPager, func() (int, error) { pg, err := subPager.NextPage(ctx); return len(pg.Value), err }); n != 2 {
		t.Errorf("listed %d identities in the subscription, want 2", n)
	}
	if _, err := c.identities.Delete(ctx, "rg", "other", nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.identities.Get(ctx, "rg", "other", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	if _, err := c.identities.Delete(ctx, "rg", "other", nil); err != nil {
		t.Fatalf("deleting a missing identity: %v", err)
	}
	_, err = c.identities.CreateOrUpdate(ctx, "rg", "x", armmsi.Identity{Location: ptr("eastus")}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "InvalidResourceName")
}

func TestFederatedIdentityCredentials(t *testing.T) {
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
	fic := func(issuer, subject string) armmsi.FederatedIdentityCredential {
		return armmsi.FederatedIdentityCredential{Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer: ptr(issuer), Subject: ptr(subject), Audiences: []*string{ptr(exchangeAudience)},
		}}
	}
	got, err := c.fics.CreateOrUpdate(ctx, "rg", "app", "K8s-Cred", fic("https://issuer.example", "system:serviceaccount:ns:sa"), nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if *got.ID != *mi.ID+"/federatedIdentityCredentials/K8s-Cred" || *got.Properties.Subject != "system:serviceaccount:ns:sa" {
		t.Errorf("credential = %+v", got)
	}
	if g, err := c.fics.Get(ctx, "rg", "app", "k8s-cred", nil); err != nil || *g.Name != "K8s-Cred" {
		t.Fatalf("get: %v %+v", err, g)
	}
	// issuer + subject are unique per identity.
	_, err = c.fics.CreateOrUpdate(ctx, "rg", "app", "dup", fic("https://issuer.example", "system:serviceaccount:ns:sa"), nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "Conflict")
	// At most 20 per identity.
	for i := 2; i <= 20; i++ {
		if _, err := c.fics.CreateOrUpdate(ctx, "rg", "app", fmt.Sprintf("cred-%02d", i), fic("https://issuer.example", fmt.Sprintf("s%d", i)), nil); err != nil {
			t.Fatalf("credential %d: %v", i, err)
		}
	}
	_, err = c.fics.CreateOrUpdate(ctx, "rg", "app", "cred-21", fic("https://issuer.example", "s21"), nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadRequest")
	// Replacing one in place is still allowed at the limit.
	if _, err := c.fics.CreateOrUpdate(ctx, "rg", "app", "cred-20", fic("https://issuer.example", "s20-new"), nil); err != nil {
		t.Fatalf("replace at the limit: %v", err)
	}
	n := 0
	for pager := c.fics.NewListPager("rg", "app", nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != 20 {
		t.Errorf("listed %d credentials, want 20", n)
	}
	if _, err := c.fics.Delete(ctx, "rg", "app", "cred-20", nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.fics.Get(ctx, "rg", "app", "cred-20", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	_, err = c.fics.CreateOrUpdate(ctx, "rg", "app", "bad", fic("http://insecure.example", "s"), nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadRequest")
	_, err = c.fics.CreateOrUpdate(ctx, "rg", "missing", "k8s", fic("https://issuer.example", "s"), nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
}

// TestManagedIdentityTokenThroughFederation: an identity made through ARM gets a token with a
// federated credential made through ARM, is denied, and is allowed once a role is assigned.
func TestManagedIdentityTokenThroughFederation(t *testing.T) {
	is := cloudtest.NewIssuer(t)
	e := start(t, is.CAPEM())
	admin := e.clients(t, e.cred)
	ctx := t.Context()
	if _, err := admin.groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	mi, err := admin.identities.CreateOrUpdate(ctx, "rg", "workload", armmsi.Identity{Location: ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const subject = "system:serviceaccount:default:workload"
	cred, err := azidentity.NewClientAssertionCredential(e.s.TenantID, *mi.Properties.ClientID,
		func(context.Context) (string, error) { return is.Token(t, subject), nil },
		&azidentity.ClientAssertionCredentialOptions{ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope}}); err == nil {
		t.Fatal("token without a federated credential")
	}
	if _, err := admin.fics.CreateOrUpdate(ctx, "rg", "workload", "k8s", armmsi.FederatedIdentityCredential{Properties: &armmsi.FederatedIdentityCredentialProperties{
		Issuer: ptr(is.URL()), Subject: ptr(subject), Audiences: []*string{ptr(exchangeAudience)},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	// The next token request sees the new credential (the credential caches nothing that failed).
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope}})
	if err != nil {
		t.Fatalf("token through the federated credential: %v", err)
	}
	claims, err := e.c.Entra().Verify(ctx, tok.Token, func(string) bool { return true })
	if err != nil || claims.ObjectID != *mi.Properties.PrincipalID || claims.MIResource != *mi.ID {
		t.Fatalf("claims = %+v, %v", claims, err)
	}

	as := e.clients(t, cred)
	_, err = as.identities.Get(ctx, "rg", "workload", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	if _, err := admin.assignments.Create(ctx, e.rgID("rg"), uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{RoleDefinitionID: ptr(e.roleDefID(authz.Reader)), PrincipalID: mi.Properties.PrincipalID},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := as.identities.Get(ctx, "rg", "workload", nil); err != nil {
		t.Fatalf("after the Reader assignment: %v", err)
	}
	// Reader does not write.
	_, err = as.identities.CreateOrUpdate(ctx, "rg", "another", armmsi.Identity{Location: ptr("eastus")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	// Nor does it reach outside its scope.
	_, err = as.groups.Get(ctx, "elsewhere", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")

	// Deleting the credential is effective for the next token request.
	if _, err := admin.fics.Delete(ctx, "rg", "workload", "k8s", nil); err != nil {
		t.Fatal(err)
	}
	fresh, _ := azidentity.NewClientAssertionCredential(e.s.TenantID, *mi.Properties.ClientID,
		func(context.Context) (string, error) { return is.Token(t, subject), nil },
		&azidentity.ClientAssertionCredentialOptions{ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true})
	if _, err := fresh.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope}}); err == nil {
		t.Fatal("token after the credential was deleted")
	}
}
