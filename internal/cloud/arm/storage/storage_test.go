package storage_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

var poll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

// start runs a cloud and returns it with a storage accounts client of its Owner.
func start(t *testing.T) (*cloud.Cloud, *armstorage.AccountsClient) {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM()})
	cred, opts := cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	for _, rg := range []string{"rg", "rg2"} {
		cloudtest.CreateGroup(t, c, cred, opts, "westeurope", rg)
	}
	accounts, err := armstorage.NewAccountsClient(c.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, accounts
}

func create(t *testing.T, c *armstorage.AccountsClient, rg, name string, p armstorage.AccountCreateParameters) (armstorage.Account, error) {
	t.Helper()
	pl, err := c.BeginCreate(t.Context(), rg, name, p, nil)
	if err != nil {
		return armstorage.Account{}, err
	}
	res, err := pl.PollUntilDone(t.Context(), poll)
	return res.Account, err
}

func minimal() armstorage.AccountCreateParameters {
	return armstorage.AccountCreateParameters{
		Location: new("West Europe"),
		Kind:     new(armstorage.KindStorageV2),
		SKU:      &armstorage.SKU{Name: new(armstorage.SKUNameStandardLRS)},
		Properties: &armstorage.AccountPropertiesCreateParameters{
			MinimumTLSVersion: new(armstorage.MinimumTLSVersionTLS12), AllowBlobPublicAccess: new(false),
		},
	}
}

func TestStorageAccountLifecycle(t *testing.T) {
	_, accounts := start(t)
	ctx := t.Context()
	acct, err := create(t, accounts, "rg", "stcerulean1", minimal())
	if err != nil {
		t.Fatal(err)
	}
	p := acct.Properties
	if *p.ProvisioningState != armstorage.ProvisioningStateSucceeded || *acct.Location != "westeurope" || *acct.SKU.Name != armstorage.SKUNameStandardLRS ||
		*acct.Kind != armstorage.KindStorageV2 || *p.MinimumTLSVersion != armstorage.MinimumTLSVersionTLS12 {
		t.Fatalf("created: %+v", acct)
	}
	if p.PrimaryEndpoints == nil || *p.PrimaryEndpoints.Blob != "https://stcerulean1.blob.core.windows.net/" || *p.PrimaryEndpoints.Queue != "https://stcerulean1.queue.core.windows.net/" {
		t.Fatalf("primary endpoints: %+v", p.PrimaryEndpoints)
	}
	got, err := accounts.GetProperties(ctx, "rg", "stcerulean1", nil)
	if err != nil || *got.ID != *acct.ID || *got.Properties.PrimaryEndpoints.Table != "https://stcerulean1.table.core.windows.net/" {
		t.Fatalf("get: %v %+v", err, got)
	}

	keys, err := accounts.ListKeys(ctx, "rg", "stcerulean1", nil)
	if err != nil || len(keys.Keys) != 2 || *keys.Keys[0].KeyName != "key1" || *keys.Keys[1].KeyName != "key2" ||
		*keys.Keys[0].Permissions != armstorage.KeyPermissionFull || len(*keys.Keys[0].Value) != 88 || *keys.Keys[0].Value == *keys.Keys[1].Value {
		t.Fatalf("keys: %v %+v", err, keys)
	}
	regen, err := accounts.RegenerateKey(ctx, "rg", "stcerulean1", armstorage.AccountRegenerateKeyParameters{KeyName: new("key1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *regen.Keys[0].Value == *keys.Keys[0].Value || *regen.Keys[1].Value != *keys.Keys[1].Value {
		t.Fatal("regenerateKey must replace key1 and keep key2")
	}
	again, err := accounts.ListKeys(ctx, "rg", "stcerulean1", nil)
	if err != nil || *again.Keys[0].Value != *regen.Keys[0].Value {
		t.Fatalf("keys after regenerate: %v", err)
	}
	_, err = accounts.RegenerateKey(ctx, "rg", "stcerulean1", armstorage.AccountRegenerateKeyParameters{KeyName: new("key3")}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadRequest")

	// A PUT again updates and keeps the keys.
	upd := minimal()
	upd.Tags = map[string]*string{"env": new("test")}
	acct, err = create(t, accounts, "rg", "stcerulean1", upd)
	if err != nil || *acct.Tags["env"] != "test" {
		t.Fatalf("update: %v %+v", err, acct.Tags)
	}
	if k, _ := accounts.ListKeys(ctx, "rg", "stcerulean1", nil); *k.Keys[0].Value != *regen.Keys[0].Value {
		t.Fatal("an update must not change the keys")
	}
	patched, err := accounts.Update(ctx, "rg", "stcerulean1", armstorage.AccountUpdateParameters{
		Tags:       map[string]*string{"env": new("prod")},
		Properties: &armstorage.AccountPropertiesUpdateParameters{AllowBlobPublicAccess: new(true)},
	}, nil)
	if err != nil || *patched.Tags["env"] != "prod" || !*patched.Properties.AllowBlobPublicAccess || *patched.Properties.MinimumTLSVersion != armstorage.MinimumTLSVersionTLS12 {
		t.Fatalf("patch: %v %+v", err, patched)
	}
	pager := accounts.NewListByResourceGroupPager("rg", nil)
	page, err := pager.NextPage(ctx)
	if err != nil || len(page.Value) != 1 {
		t.Fatalf("list: %v %+v", err, page)
	}

	if _, err := accounts.Delete(ctx, "rg", "stcerulean1", nil); err != nil {
		t.Fatal(err)
	}
	_, err = accounts.GetProperties(ctx, "rg", "stcerulean1", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	_, err = accounts.ListKeys(ctx, "rg", "stcerulean1", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	if _, err := accounts.Delete(ctx, "rg", "stcerulean1", nil); err != nil {
		t.Fatalf("deleting a missing account is not an error: %v", err)
	}
}

func TestStorageAccountNames(t *testing.T) {
	_, accounts := start(t)
	ctx := t.Context()
	if _, err := create(t, accounts, "rg", "stglobal", minimal()); err != nil {
		t.Fatal(err)
	}
	// Names are global: another group cannot take it.
	_, err := create(t, accounts, "rg2", "stglobal", minimal())
	cloudtest.RespErr(t, err, http.StatusConflict, "StorageAccountAlreadyTaken")
	check := func(name string) armstorage.CheckNameAvailabilityResult {
		t.Helper()
		res, err := accounts.CheckNameAvailability(ctx, armstorage.AccountCheckNameAvailabilityParameters{Name: new(name), Type: new("Microsoft.Storage/storageAccounts")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.CheckNameAvailabilityResult
	}
	if r := check("stglobal"); *r.NameAvailable || *r.Reason != armstorage.ReasonAlreadyExists {
		t.Fatalf("taken name: %+v", r)
	}
	if r := check("stfree"); !*r.NameAvailable {
		t.Fatalf("free name: %+v", r)
	}
	if r := check("Bad_Name"); *r.NameAvailable || *r.Reason != armstorage.ReasonAccountNameInvalid {
		t.Fatalf("invalid name: %+v", r)
	}

	for _, tc := range []struct {
		name, account string
		edit          func(*armstorage.AccountCreateParameters)
		code          string
	}{
		{"upper case", "StBad", nil, "AccountNameInvalid"},
		{"too short", "st", nil, "AccountNameInvalid"},
		{"no sku", "stnosku", func(p *armstorage.AccountCreateParameters) { p.SKU = nil }, "MissingRequiredProperty"},
		{"no location", "stnoloc", func(p *armstorage.AccountCreateParameters) { p.Location = nil }, "LocationRequired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := minimal()
			if tc.edit != nil {
				tc.edit(&p)
			}
			_, err := create(t, accounts, "rg", tc.account, p)
			cloudtest.RespErr(t, err, http.StatusBadRequest, tc.code)
			_, err = accounts.GetProperties(ctx, "rg", tc.account, nil)
			if err == nil {
				t.Fatal("a refused account was stored")
			}
		})
	}
}
