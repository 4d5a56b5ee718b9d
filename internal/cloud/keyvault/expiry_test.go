package keyvault_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// TestTimeDrivenBehaviour moves the cloud's clock: tokens expire, and soft-deleted secrets and
// vaults disappear at their scheduled purge date, freeing their names.
func TestTimeDrivenBehaviour(t *testing.T) {
	clk := cloudtest.NewClock()
	e := startWithClock(t, clk.Now)
	ctx := t.Context()
	v := e.createVault(t, "kv-clock", armkeyvault.VaultProperties{EnableRbacAuthorization: to.Ptr(true), SoftDeleteRetentionInDays: to.Ptr[int32](7)})
	uri := *v.Properties.VaultURI
	e.assign(t, e.vaultID("kv-clock"), roleSecretsOfficer, e.s.ObjectID)
	c := e.secrets(t, uri, e.owner)
	if _, err := c.SetSecret(ctx, "short-lived", azsecrets.SetSecretParameters{Value: to.Ptr("v1")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSecret(ctx, "short-lived", nil); err != nil {
		t.Fatal(err)
	}

	old := cloudtest.Token(t, e.owner, vaultScope)
	clk.Advance(2 * time.Hour)
	resp, body := e.raw(t, "GET", uri+"secrets?api-version=7.5", old, "")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("expired token: %d %v", resp.StatusCode, body)
	}

	// Seven days on, the deleted secret is gone and its name is free. A new credential: the
	// SDK's token cache runs on the real clock.
	clk.Advance(7 * 24 * time.Hour)
	e.owner = cloudtest.OwnerCred(t, e.c)
	c = e.secrets(t, uri, e.owner)
	_, err := c.GetDeletedSecret(ctx, "short-lived", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")
	if _, err := c.SetSecret(ctx, "short-lived", azsecrets.SetSecretParameters{Value: to.Ptr("v2")}, nil); err != nil {
		t.Fatalf("set a name past its purge date: %v", err)
	}
	n := 0
	for pager := c.NewListSecretPropertiesVersionsPager("short-lived", nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != 1 {
		t.Fatalf("versions after the purge date = %d, want only the new one", n)
	}

	// A deleted vault holds its name until its purge date, then frees it.
	if _, err := e.vaults(t).Delete(ctx, e.rg, "kv-clock", nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.vaults(t).BeginCreateOrUpdate(ctx, e.rg, "kv-clock", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{TenantID: to.Ptr(e.s.TenantID),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)}},
	}, nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "ConflictError")
	clk.Advance(8 * 24 * time.Hour)
	e.owner = cloudtest.OwnerCred(t, e.c)
	again := e.createVault(t, "kv-clock", armkeyvault.VaultProperties{})
	if *again.Properties.EnableRbacAuthorization {
		t.Fatal("the re-created vault kept the purged one's properties")
	}
}
