package keyvault_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

type env struct {
	c      *cloud.Cloud
	s      cloud.Settings
	cred   azcore.TokenCredential
	vaults *armkeyvault.VaultsClient
	groups *armresources.ResourceGroupsClient
}

func start(t *testing.T) *env {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM()})
	e := newEnv(t, c, cloudtest.ARMOptions(c))
	for _, rg := range []string{"rg-a", "rg-b"} {
		cloudtest.CreateGroup(t, c, e.cred, cloudtest.ARMOptions(c), "eastus", rg)
	}
	return e
}

// newEnv is c with the Owner's vaults and groups clients.
func newEnv(t *testing.T, c *cloud.Cloud, opts *arm.ClientOptions) *env {
	t.Helper()
	e := &env{c: c, s: c.Settings(), cred: cloudtest.OwnerCred(t, c)}
	var err error
	if e.vaults, err = armkeyvault.NewVaultsClient(e.s.SubscriptionID, e.cred, opts); err != nil {
		t.Fatal(err)
	}
	if e.groups, err = armresources.NewResourceGroupsClient(e.s.SubscriptionID, e.cred, opts); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) params(mode *armkeyvault.CreateMode, purgeProtection bool) armkeyvault.VaultCreateOrUpdateParameters {
	p := armkeyvault.VaultCreateOrUpdateParameters{Location: to.Ptr("eastus"), Tags: map[string]*string{"team": to.Ptr("a")},
		Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(e.s.TenantID), EnableRbacAuthorization: to.Ptr(true), CreateMode: mode,
			SKU:                       &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			SoftDeleteRetentionInDays: to.Ptr[int32](7),
		}}
	if purgeProtection {
		p.Properties.EnablePurgeProtection = to.Ptr(true)
	}
	return p
}

func (e *env) create(t *testing.T, rg, name string, p armkeyvault.VaultCreateOrUpdateParameters) (armkeyvault.Vault, error) {
	t.Helper()
	poller, err := e.vaults.BeginCreateOrUpdate(t.Context(), rg, name, p, nil)
	if err != nil {
		return armkeyvault.Vault{}, err
	}
	res, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond})
	return res.Vault, err
}

// secretsOf grants the bootstrap principal Secrets Officer on the vault and returns a client.
func (e *env) secretsOf(t *testing.T, v armkeyvault.Vault) *azsecrets.Client {
	t.Helper()
	ra, err := armauthorization.NewRoleAssignmentsClient(e.s.SubscriptionID, e.cred, &arm.ClientOptions{ClientOptions: e.c.ClientOptions()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ra.Create(t.Context(), *v.ID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + e.s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/b86a8fe4-44ce-4948-aee5-eccb2c155cd7"),
		PrincipalID:      to.Ptr(e.s.ObjectID),
	}}, nil)
	if err != nil {
		t.Fatalf("assign Secrets Officer: %v", err)
	}
	c, err := azsecrets.NewClient(*v.Properties.VaultURI, e.cred, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVaultLifecycle(t *testing.T) {
	e := start(t)
	ctx := t.Context()

	// Create is a long-running operation: the poller is not done after the first response.
	poller, err := e.vaults.BeginCreateOrUpdate(ctx, "rg-a", "kv-life", e.params(nil, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	if poller.Done() {
		t.Fatal("create finished in its first response; want a poller to follow")
	}
	res, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v := res.Vault
	u, err := url.Parse(*v.Properties.VaultURI)
	if err != nil || u.Scheme != "https" || u.Hostname() != "127.0.0.1" || u.Port() == "" {
		t.Fatalf("vaultUri = %s", *v.Properties.VaultURI)
	}
	if *v.Properties.ProvisioningState != armkeyvault.VaultProvisioningStateSucceeded || !*v.Properties.EnableSoftDelete ||
		*v.Properties.SoftDeleteRetentionInDays != 7 || *v.Type != "Microsoft.KeyVault/vaults" {
		t.Fatalf("vault = %+v", v.Properties)
	}
	if _, err := e.vaults.Get(ctx, "rg-a", "kv-life", nil); err != nil {
		t.Fatal(err)
	}

	// Names: 3-24 characters, letter first, letter or digit last, no "--"; unique in the cloud.
	for _, bad := range []string{"ab", strings.Repeat("a", 25), "1abc", "a--b", "abc-", "a_bc"} {
		_, err := e.vaults.BeginCreateOrUpdate(ctx, "rg-a", bad, e.params(nil, false), nil)
		cloudtest.RespErr(t, err, http.StatusBadRequest, "VaultNameNotValid")
	}
	_, err = e.vaults.BeginCreateOrUpdate(ctx, "rg-b", "kv-life", e.params(nil, false), nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "VaultAlreadyExists")
	for name, want := range map[string]bool{"kv-life": false, "kv-free": true, "x": false} {
		r, err := e.vaults.CheckNameAvailability(ctx, armkeyvault.VaultCheckNameAvailabilityParameters{Name: to.Ptr(name), Type: to.Ptr("Microsoft.KeyVault/vaults")}, nil)
		if err != nil || *r.NameAvailable != want {
			t.Errorf("checkNameAvailability(%s) = %v, %v", name, r.NameAvailable, err)
		}
	}

	// Lists, PATCH.
	count := func(pager interface {
		More() bool
	}, next func() (int, error)) int {
		n := 0
		for pager.More() {
			k, err := next()
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		return n
	}
	rgPager := e.vaults.NewListByResourceGroupPager("rg-a", nil)
	if n := count(rgPager, func() (int, error) { p, err := rgPager.NextPage(ctx); return len(p.Value), err }); n != 1 {
		t.Errorf("vaults in rg-a = %d", n)
	}
	subPager := e.vaults.NewListBySubscriptionPager(nil)
	if n := count(subPager, func() (int, error) { p, err := subPager.NextPage(ctx); return len(p.Value), err }); n != 1 {
		t.Errorf("vaults in subscription = %d", n)
	}
	patched, err := e.vaults.Update(ctx, "rg-a", "kv-life", armkeyvault.VaultPatchParameters{Tags: map[string]*string{"team": to.Ptr("b")}}, nil)
	if err != nil || *patched.Tags["team"] != "b" || *patched.Properties.VaultURI != *v.Properties.VaultURI {
		t.Fatalf("patch: %v", err)
	}
	_, err = e.vaults.Update(ctx, "rg-a", "kv-life", armkeyvault.VaultPatchParameters{Properties: &armkeyvault.VaultPatchProperties{SoftDeleteRetentionInDays: to.Ptr[int32](30)}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadRequest")

	sc := e.secretsOf(t, v)
	if _, err := sc.SetSecret(ctx, "kept", azsecrets.SetSecretParameters{Value: to.Ptr("across-recovery")}, nil); err != nil {
		t.Fatal(err)
	}

	// Soft delete: gone from the group, listed as deleted, name still held.
	if _, err := e.vaults.Delete(ctx, "rg-a", "kv-life", nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.vaults.Get(ctx, "rg-a", "kv-life", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	if _, err := sc.GetSecret(ctx, "kept", "", nil); err == nil {
		t.Fatal("the data plane of a deleted vault still answers")
	}
	d, err := e.vaults.GetDeleted(ctx, "kv-life", "eastus", nil)
	if err != nil || !strings.EqualFold(*d.Properties.VaultID, *v.ID) || d.Properties.ScheduledPurgeDate.Sub(*d.Properties.DeletionDate) != 7*24*time.Hour {
		t.Fatalf("get deleted: %+v %v", d.Properties, err)
	}
	delPager := e.vaults.NewListDeletedPager(nil)
	if n := count(delPager, func() (int, error) { p, err := delPager.NextPage(ctx); return len(p.Value), err }); n != 1 {
		t.Errorf("deleted vaults = %d", n)
	}
	_, err = e.vaults.BeginCreateOrUpdate(ctx, "rg-a", "kv-life", e.params(nil, false), nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "ConflictError")

	// Recover: same vaultUri, secrets kept.
	rec, err := e.create(t, "rg-a", "kv-life", e.params(to.Ptr(armkeyvault.CreateModeRecover), false))
	if err != nil || *rec.Properties.VaultURI != *v.Properties.VaultURI || *rec.Tags["team"] != "b" {
		t.Fatalf("recover: %v", err)
	}
	if _, err := e.create(t, "rg-a", "kv-life", e.params(to.Ptr(armkeyvault.CreateModeRecover), false)); err != nil {
		t.Fatalf("a repeated recover PUT on the active vault: %v", err)
	}
	sc = e.secretsOf(t, rec) // role assignments went with the deleted vault
	if got, err := sc.GetSecret(ctx, "kept", "", nil); err != nil || *got.Value != "across-recovery" {
		t.Fatalf("secret after recover: %v", err)
	}

	// Delete with its resource group, then purge: the name is free and the secrets are gone.
	gp, err := e.groups.BeginDelete(ctx, "rg-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gp.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.vaults.GetDeleted(ctx, "kv-life", "eastus", nil); err != nil {
		t.Fatalf("vault deleted with its group is not soft-deleted: %v", err)
	}
	// Its listener closes without a request to notice (a generous bound, not a timing test).
	for deadline := time.Now().Add(30 * time.Second); e.c.KeyVault().Serving("kv-life"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener of a vault deleted with its group is still open")
		}
	}
	pp, err := e.vaults.BeginPurgeDeleted(ctx, "kv-life", "eastus", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp.Done() {
		t.Error("the purge answered as a finished operation; Azure answers 202 and runs it")
	}
	if _, err := pp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.vaults.GetDeleted(ctx, "kv-life", "eastus", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	again, err := e.create(t, "rg-b", "kv-life", e.params(nil, false))
	if err != nil {
		t.Fatalf("create after purge: %v", err)
	}
	page, err := e.secretsOf(t, again).NewListSecretPropertiesPager(nil).NextPage(ctx)
	if err != nil || len(page.Value) != 0 {
		t.Fatalf("a purged vault's secrets came back: %v", err)
	}
}

func TestPurgeProtection(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	if _, err := e.create(t, "rg-a", "kv-protected", e.params(nil, true)); err != nil {
		t.Fatal(err)
	}
	_, err := e.vaults.Update(ctx, "rg-a", "kv-protected", armkeyvault.VaultPatchParameters{Properties: &armkeyvault.VaultPatchProperties{EnablePurgeProtection: to.Ptr(false)}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadRequest")
	if _, err := e.vaults.Delete(ctx, "rg-a", "kv-protected", nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.vaults.BeginPurgeDeleted(ctx, "kv-protected", "eastus", nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "Conflict")
	p := e.params(nil, false)
	p.Properties.EnableSoftDelete = to.Ptr(false)
	_, err = e.vaults.BeginCreateOrUpdate(ctx, "rg-a", "kv-nosoft", p, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadRequest")
}

// TestVaultURIStableAcrossRestart closes the cloud and starts it again on the same data
// directory: the vault is served again on the port its vaultUri names, with its secrets.
func TestVaultURIStableAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	startAt := func() *env {
		c := cloudtest.Start(t, cloud.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM()})
		return newEnv(t, c, &arm.ClientOptions{ClientOptions: c.ClientOptions()})
	}
	e := startAt()
	if _, err := e.groups.CreateOrUpdate(t.Context(), "rg-a", armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	v, err := e.create(t, "rg-a", "kv-restart", e.params(nil, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.secretsOf(t, v).SetSecret(t.Context(), "s", azsecrets.SetSecretParameters{Value: to.Ptr("kept")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := startAt()
	got, err := e2.vaults.Get(t.Context(), "rg-a", "kv-restart", nil)
	if err != nil || *got.Properties.VaultURI != *v.Properties.VaultURI {
		t.Fatalf("vaultUri after restart: %v", err)
	}
	o := e2.c.ClientOptions()
	sc, err := azsecrets.NewClient(*v.Properties.VaultURI, e2.cred, &azsecrets.ClientOptions{ClientOptions: o, DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := sc.GetSecret(t.Context(), "s", "", nil); err != nil || *s.Value != "kept" {
		t.Fatalf("secret after restart: %v", err)
	}
}
