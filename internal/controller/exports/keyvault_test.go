package exports_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/exports"
)

// cloudConfig is where the local cloud is, as the manager's settings say it.
func cloudConfig(c *cloud.Cloud) azure.Config {
	s := c.Settings()
	return azure.Config{TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, AuthorityHost: s.AuthorityHost,
		ResourceManagerEndpoint: s.ResourceManagerEndpoint, ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile}
}

// rbacVault creates a vault with RBAC authorization and returns its id and URI.
func rbacVault(t *testing.T, c *cloud.Cloud, owner azcore.TokenCredential, rg, name string) (string, string) {
	t.Helper()
	v := cloudtest.CreateRBACVault(t, c, owner, cloudtest.ARMOptions(c), "eastus", rg, name)
	return *v.ID, *v.Properties.VaultURI
}

func assignRole(t *testing.T, c *cloud.Cloud, owner azcore.TokenCredential, scope, role, principalID string) {
	t.Helper()
	s := c.Settings()
	ra, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, owner, cloudtest.ARMOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ra.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(principalID),
			PrincipalType:    to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil); err != nil {
		t.Fatalf("assign role: %v", err)
	}
}

// The Key Vault writer puts one JSON-map secret per resource with an identity that holds only
// Key Vault Secrets Officer on the vault, writes only when the map changes, and is refused,
// without showing a value, by an identity without the role.
func TestKeyVaultWriter(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	owner := cloudtest.OwnerCred(t, c)
	cloudtest.CreateGroup(t, c, owner, cloudtest.ARMOptions(c), "eastus", "rg-exports")
	vaultID, vaultURI := rbacVault(t, c, owner, "rg-exports", "kv-exports")

	manager, managerCred := cloudtest.NewPrincipal(t, c, "manager")
	assignRole(t, c, owner, vaultID, authz.KeyVaultSecretsOfficer, manager.ObjectID)
	w := exports.NewKeyVaultWriter(cloudConfig(c))
	ctx := t.Context()
	name := exports.KeyVaultSecretName("UserAssignedIdentity", "team-a", "app-identity")
	vals := map[string]string{"clientId": "6f1c0a42-3b1e-4b5f-9f5c-7d8b2a1e0c33", "principalId": "2b7e151c-2f5e-4a8f-8c3e-0b8b7c6d5e4f"}

	puts := func() int {
		return len(c.Requests(reqlog.Filter{Service: "keyvault", Method: http.MethodPut, Principal: manager.ObjectID}))
	}
	if err := w.Write(ctx, managerCred, vaultURI, name, vals); err != nil {
		t.Fatalf("Write: %v", err)
	}
	reader, err := azsecrets.NewClient(vaultURI, managerCred, &azsecrets.ClientOptions{ClientOptions: c.ClientOptions(), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	read := func() (map[string]string, string) {
		t.Helper()
		got, err := reader.GetSecret(ctx, name, "", nil)
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(*got.Value), &m); err != nil {
			t.Fatalf("secret value is not a JSON map: %v", err)
		}
		return m, *got.ContentType
	}
	if m, ct := read(); ct != "application/json" || len(m) != 2 || m["clientId"] != vals["clientId"] || m["principalId"] != vals["principalId"] {
		t.Errorf("secret %s = %v (%s)", name, m, ct)
	}
	if n := puts(); n != 1 {
		t.Errorf("%d PUTs after the first write, want 1", n)
	}

	for range 3 {
		if err := w.Write(ctx, managerCred, vaultURI, name, map[string]string{"principalId": vals["principalId"], "clientId": vals["clientId"]}); err != nil {
			t.Fatal(err)
		}
	}
	if n := puts(); n != 1 {
		t.Errorf("%d PUTs after identical writes, want still 1", n)
	}

	vals["clientId"] = "rotated-client-9931"
	if err := w.Write(ctx, managerCred, vaultURI, name, vals); err != nil {
		t.Fatal(err)
	}
	if m, _ := read(); m["clientId"] != "rotated-client-9931" || puts() != 2 {
		t.Errorf("after a change: %v, %d PUTs", m, puts())
	}

	t.Run("refused without the role", func(t *testing.T) {
		_, otherCred := cloudtest.NewPrincipal(t, c, "no-role")
		err := w.Write(ctx, otherCred, vaultURI, name, map[string]string{"clientId": "leaked-value-1234"})
		if err == nil {
			t.Fatal("a principal without a role wrote the secret")
		}
		cloudtest.RespErr(t, err, http.StatusForbidden, "")
		if strings.Contains(err.Error(), "leaked-value-1234") || strings.Contains(err.Error(), "rotated-client-9931") {
			t.Errorf("error shows a value: %v", err)
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name the secret: %v", err)
		}
		if m, _ := read(); m["clientId"] != "rotated-client-9931" {
			t.Errorf("refused write changed the secret: %v", m)
		}
	})

	t.Run("bad name", func(t *testing.T) {
		if err := w.Write(ctx, managerCred, vaultURI, "has.dot", vals); err == nil || !strings.Contains(err.Error(), "not 1-127") {
			t.Errorf("Write with an invalid name: %v", err)
		}
	})
}
