package keyvault_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// TestRBACDenyThenAllow walks a principal from no role, through roles that grant no data
// access, to Secrets User and Secrets Officer.
func TestRBACDenyThenAllow(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-rbac")
	id := e.vaultID("kv-rbac")
	e.assign(t, id, roleSecretsOfficer, e.s.ObjectID)
	admin := e.secrets(t, uri, e.owner)
	ctx := t.Context()
	if _, err := admin.SetSecret(ctx, "exists", azsecrets.SetSecretParameters{Value: to.Ptr("v")}, nil); err != nil {
		t.Fatal(err)
	}
	app, cred := cloudtest.NewPrincipal(t, e.c, "app")
	c := e.secrets(t, uri, cred)

	denied := func(step string) {
		t.Helper()
		// The same answer for a name that exists and one that does not: no leak.
		for _, name := range []string{"exists", "does-not-exist"} {
			_, err := c.GetSecret(ctx, name, "", nil)
			cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
			if code := innerCode(t, err); code != "ForbiddenByRbac" {
				t.Fatalf("%s: get %s innererror %q", step, name, code)
			}
		}
	}
	denied("no role")
	e.assign(t, id, roleOwner, app.ObjectID)
	denied("Owner")
	e.assign(t, "/subscriptions/"+e.s.SubscriptionID, roleContributor, app.ObjectID)
	denied("Contributor")

	// Secrets User at the vault: get and list, nothing else.
	e.assign(t, id, roleSecretsUser, app.ObjectID)
	if got, err := c.GetSecret(ctx, "exists", "", nil); err != nil || *got.Value != "v" {
		t.Fatalf("Secrets User get: %v", err)
	}
	_, err := c.GetSecret(ctx, "does-not-exist", "", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")
	if _, err := c.NewListSecretPropertiesPager(nil).NextPage(ctx); err != nil {
		t.Fatalf("Secrets User list: %v", err)
	}
	_, err = c.SetSecret(ctx, "new", azsecrets.SetSecretParameters{Value: to.Ptr("v")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	_, err = c.DeleteSecret(ctx, "exists", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")

	// Secrets Officer at the vault: every secret operation.
	e.assign(t, id, roleSecretsOfficer, app.ObjectID)
	if _, err := c.SetSecret(ctx, "other", azsecrets.SetSecretParameters{Value: to.Ptr("v")}, nil); err != nil {
		t.Fatalf("Officer at vault: %v", err)
	}
	if _, err := c.DeleteSecret(ctx, "other", nil); err != nil {
		t.Fatalf("Officer delete: %v", err)
	}

	// Key Vault Administrator grants every data action too.
	admin2, cred2 := cloudtest.NewPrincipal(t, e.c, "kv-admin")
	e.assign(t, id, roleKVAdmin, admin2.ObjectID)
	if _, err := e.secrets(t, uri, cred2).PurgeDeletedSecret(ctx, "other", nil); err != nil {
		t.Fatalf("Administrator purge: %v", err)
	}
}

// TestAccessPolicyMode authorizes from the vault's access policies, changed through the
// accessPolicies sub-resource; role assignments do not count in this mode.
func TestAccessPolicyMode(t *testing.T) {
	e := start(t)
	app, cred := cloudtest.NewPrincipal(t, e.c, "app")
	policy := func(objectID string, perms ...string) *armkeyvault.AccessPolicyEntry {
		var ps []*armkeyvault.SecretPermissions
		for _, p := range perms {
			ps = append(ps, to.Ptr(armkeyvault.SecretPermissions(p)))
		}
		return &armkeyvault.AccessPolicyEntry{TenantID: to.Ptr(e.s.TenantID), ObjectID: to.Ptr(objectID),
			Permissions: &armkeyvault.Permissions{Secrets: ps}}
	}
	v := e.createVault(t, "kv-policies", armkeyvault.VaultProperties{AccessPolicies: []*armkeyvault.AccessPolicyEntry{
		policy(e.s.ObjectID, "all"), policy(app.ObjectID, "get", "list"),
	}})
	if v.Properties.EnableRbacAuthorization == nil || *v.Properties.EnableRbacAuthorization {
		t.Fatalf("enableRbacAuthorization = %v, want false", v.Properties.EnableRbacAuthorization)
	}
	uri := *v.Properties.VaultURI
	ctx := t.Context()
	if _, err := e.secrets(t, uri, e.owner).SetSecret(ctx, "s", azsecrets.SetSecretParameters{Value: to.Ptr("v")}, nil); err != nil {
		t.Fatalf("owner policy set: %v", err)
	}
	c := e.secrets(t, uri, cred)
	if got, err := c.GetSecret(ctx, "s", "", nil); err != nil || *got.Value != "v" {
		t.Fatalf("policy get: %v", err)
	}
	_, err := c.SetSecret(ctx, "s", azsecrets.SetSecretParameters{Value: to.Ptr("w")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if code := innerCode(t, err); code != "AccessDenied" {
		t.Fatalf("innererror %q, want AccessDenied", code)
	}
	// A role assignment does not help in access-policy mode.
	e.assign(t, e.vaultID("kv-policies"), roleSecretsOfficer, app.ObjectID)
	_, err = c.SetSecret(ctx, "s", azsecrets.SetSecretParameters{Value: to.Ptr("w")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")

	update := func(kind armkeyvault.AccessPolicyUpdateKind, p *armkeyvault.AccessPolicyEntry) []*armkeyvault.AccessPolicyEntry {
		t.Helper()
		res, err := e.vaults(t).UpdateAccessPolicy(ctx, e.rg, "kv-policies", kind, armkeyvault.VaultAccessPolicyParameters{
			Properties: &armkeyvault.VaultAccessPolicyProperties{AccessPolicies: []*armkeyvault.AccessPolicyEntry{p}},
		}, nil)
		if err != nil {
			t.Fatalf("accessPolicies/%s: %v", kind, err)
		}
		return res.Properties.AccessPolicies
	}
	update(armkeyvault.AccessPolicyUpdateKindAdd, policy(app.ObjectID, "set"))
	if _, err := c.SetSecret(ctx, "s", azsecrets.SetSecretParameters{Value: to.Ptr("w")}, nil); err != nil {
		t.Fatalf("set after add: %v", err)
	}
	update(armkeyvault.AccessPolicyUpdateKindRemove, policy(app.ObjectID, "set"))
	_, err = c.SetSecret(ctx, "s", azsecrets.SetSecretParameters{Value: to.Ptr("x")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if got, err := c.GetSecret(ctx, "s", "", nil); err != nil || *got.Value != "w" {
		t.Fatalf("get after remove of set: %v", err)
	}
	list := update(armkeyvault.AccessPolicyUpdateKindReplace, policy(app.ObjectID, "list"))
	if len(list) != 2 {
		t.Fatalf("policies after replace: %d, want 2", len(list))
	}
	_, err = c.GetSecret(ctx, "s", "", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	update(armkeyvault.AccessPolicyUpdateKindRemove, &armkeyvault.AccessPolicyEntry{TenantID: to.Ptr(e.s.TenantID), ObjectID: to.Ptr(app.ObjectID), Permissions: &armkeyvault.Permissions{}})
	_, err = c.NewListSecretPropertiesPager(nil).NextPage(ctx)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")

	// Switching the vault to RBAC: the role assignment now counts.
	poller, err := e.vaults(t).BeginCreateOrUpdate(ctx, e.rg, "kv-policies", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(e.s.TenantID), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNamePremium)},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetSecret(ctx, "s", azsecrets.SetSecretParameters{Value: to.Ptr("y")}, nil); err != nil {
		t.Fatalf("set in RBAC mode with Secrets Officer: %v", err)
	}
}
