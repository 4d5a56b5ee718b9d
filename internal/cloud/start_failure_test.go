package cloud_test

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/msi"
)

// A start that fails after the vaults are listening again leaves none of them, nor the main
// listener, behind: the ports are free for the next try.
func TestFailedStartReleasesItsListeners(t *testing.T) {
	dir := t.TempDir()
	first, err := cloud.Start(t.Context(), cloud.Options{Addr: "127.0.0.1:0", DataDir: dir, ARM: cloudtest.FastARM()})
	if err != nil {
		t.Fatal(err)
	}
	opts := cloudtest.ARMOptions(first)
	cred := cloudtest.OwnerCred(t, first)
	cloudtest.CreateGroup(t, first, cred, opts, "eastus", "rg")
	vaults, err := armkeyvault.NewVaultsClient(first.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vaults.BeginCreateOrUpdate(t.Context(), "rg", "kv-restart-fail", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"),
		Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(first.Settings().TenantID), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := poller.PollUntilDone(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	vaultURL, err := url.Parse(*v.Properties.VaultURI)
	if err != nil {
		t.Fatal(err)
	}
	mainAddr := first.Settings().URL[len("https://"):]
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// The managed-identity key is read after ARM and the vaults have started: break it.
	if err := os.WriteFile(filepath.Join(dir, msi.ConfigFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := cloud.Start(t.Context(), cloud.Options{Addr: mainAddr, DataDir: dir}); err == nil {
		_ = c.Close()
		t.Fatal("start with a corrupt managed-identity key succeeded")
	}
	for _, addr := range []string{vaultURL.Host, mainAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s is still held after the failed start: %v", addr, err)
			continue
		}
		_ = l.Close()
	}
}
