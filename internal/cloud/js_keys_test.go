package cloud_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// keysResult is what keys.mjs prints.
type keysResult struct {
	KeyID                                 string
	KeyHasPrivate                         bool
	Verified, TamperedVerified            bool
	Decrypted, Unwrapped                  string
	ECSigned                              int
	UnknownAlgorithm, WrongDigest         any
	OpNotAllowed, Disabled, WrongPassword any
	CertID, SecretContentType             string
	CertLength                            int
	SecretHasKey                          bool
}

// testJSKeys runs keys.mjs: @azure/keyvault-keys and @azure/keyvault-certificates (with
// @azure/keyvault-secrets for a certificate's secret) at their defaults against a vault.
func testJSKeys(t *testing.T, work string) {
	e := start(t, "")
	s := e.c.Settings()
	owner := cloudtest.OwnerCred(t, e.c)
	cloudtest.CreateGroup(t, e.c, owner, cloudtest.ARMOptions(e.c), "eastus", "rg-js-keys")
	v := cloudtest.CreateRBACVault(t, e.c, owner, cloudtest.ARMOptions(e.c), "eastus", "rg-js-keys", "kv-js-keys")
	ra, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ra.Create(t.Context(), *v.ID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + authz.KeyVaultAdministrator),
		PrincipalID:      to.Ptr(s.ObjectID), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
	}}, nil); err != nil {
		t.Fatal(err)
	}
	var res keysResult
	runNode(t, nodeRuntime{path: "node", flags: webCryptoFlag(nodeVersion(t, "node"))}, work, "keys.mjs", e.c,
		[]string{"KEYS_VAULT_URI=" + *v.Properties.VaultURI}, &res)
	uri := *v.Properties.VaultURI
	if !strings.HasPrefix(res.KeyID, uri+"keys/js-rsa/") || res.KeyHasPrivate {
		t.Errorf("key %q (private part returned: %v)", res.KeyID, res.KeyHasPrivate)
	}
	if !res.Verified || res.TamperedVerified || res.Decrypted != "a data encryption key" || res.Unwrapped != "a data encryption key" || res.ECSigned != 96 {
		t.Errorf("operations: %+v", res)
	}
	for name, got := range map[string]any{"unknown algorithm": res.UnknownAlgorithm, "wrong digest": res.WrongDigest, "wrong PFX password": res.WrongPassword} {
		if got != float64(http.StatusBadRequest) {
			t.Errorf("%s: %v, want 400", name, got)
		}
	}
	// The SDK reads the key's key_ops from the vault and refuses the operation itself (the Go
	// tests show the vault's own 403); either way the caller is told.
	if op, _ := res.OpNotAllowed.(string); res.OpNotAllowed != float64(http.StatusForbidden) && !strings.Contains(op, "unwrapKey is not supported") {
		t.Errorf("op outside key_ops: %v", res.OpNotAllowed)
	}
	if res.Disabled != float64(http.StatusForbidden) {
		t.Errorf("disabled key: %v, want 403", res.Disabled)
	}
	if !strings.HasPrefix(res.CertID, uri+"certificates/js-cert/") || res.CertLength < 200 || res.SecretContentType != "application/x-pem-file" || !res.SecretHasKey {
		t.Errorf("certificate: %+v", res)
	}
}
