package storage_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/storage"
)

// brokenAzurite is an Azurite install whose entry point exits non-zero with an error, as
// Azurite does when it cannot open its data; it runs on the real install's Node.js.
func brokenAzurite(t *testing.T) (broken, real string) {
	t.Helper()
	real, err := storage.DefaultAzuriteDir()
	if err != nil {
		t.Fatalf("%v", err) // installed by `make test-deps`; never skipped
	}
	root := t.TempDir()
	broken = filepath.Join(root, "azurite")
	src := filepath.Join(broken, "node_modules", "azurite", "dist", "src")
	for name, js := range map[string]string{
		"azurite.js": `console.log("Azurite starting");
console.error("Error: EACCES: permission denied, open '__azurite_db_blob__.json'");
process.exit(3);
`,
		"common/AccountDataStore.js": "exports.default = class {};\n", // what the cloud's preload patches
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(js), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if node := filepath.Join(filepath.Dir(real), "debian-node"); isDir(node) {
		if err := os.Symlink(node, filepath.Join(root, "debian-node")); err != nil {
			t.Fatal(err)
		}
	}
	return broken, real
}

// failedStatus is the operation's status in the poller's error (which shows the status body).
var failedStatus = regexp.MustCompile(`"status":\s*"Failed"`)

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// TestAccountFailsWhenAzuriteCannotStart: an account's create waits for Azurite; when Azurite
// cannot start, the operation and the account end Failed with Azurite's error, the account is
// not served and can be deleted; with a working Azurite, a PUT of the failed account retries
// it and accounts go Succeeded.
func TestAccountFailsWhenAzuriteCannotStart(t *testing.T) {
	broken, real := brokenAzurite(t)
	dir := t.TempDir()
	c, err := cloud.Start(t.Context(), cloud.Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler),
		ARM: cloudtest.FastARM(), AzuriteDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	cred, opts := cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	cloudtest.CreateGroup(t, c, cred, opts, "westeurope", "rg")
	accounts, err := armstorage.NewAccountsClient(c.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	const why = "EACCES: permission denied, open '__azurite_db_blob__.json'"
	for _, name := range []string{"stfailed1", "stfailed2"} {
		_, err = create(t, accounts, "rg", name, minimal())
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.ErrorCode != "InternalServerError" || !failedStatus.MatchString(err.Error()) ||
			!strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "exit status 3") {
			t.Fatalf("create %s with an Azurite that cannot start: %v", name, err)
		}
		got, err := accounts.GetProperties(ctx, "rg", name, nil)
		if err != nil || *got.Properties.ProvisioningState != armstorage.ProvisioningStateFailed {
			t.Fatalf("GET %s: %v %+v", name, err, got.Properties)
		}
		// Not served: the data planes do not know a failed account (its name does not resolve).
		if _, err := c.Storage().Handler(ctx, name+".blob.core.windows.net"); !errors.Is(err, storage.ErrAccountNotFound) {
			t.Fatalf("data plane of failed account %s: %v", name, err)
		}
	}
	// A failed account is deleted without Azurite.
	if _, err := accounts.Delete(ctx, "rg", "stfailed1", nil); err != nil {
		t.Fatalf("delete a failed account: %v", err)
	}
	if _, err := accounts.GetProperties(ctx, "rg", "stfailed1", nil); err == nil {
		t.Fatal("the deleted account is still there")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// The same cloud with a working Azurite.
	c = cloudtest.Start(t, cloud.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM(), AzuriteDir: real})
	cred, opts = cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	if accounts, err = armstorage.NewAccountsClient(c.Settings().SubscriptionID, cred, opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"stfailed2", "stnew1", "stnew2"} { // a retry, the first create, one while Azurite runs
		acct, err := create(t, accounts, "rg", name, minimal())
		if err != nil || *acct.Properties.ProvisioningState != armstorage.ProvisioningStateSucceeded {
			t.Fatalf("create %s with Azurite: %v %+v", name, err, acct.Properties)
		}
		got, err := accounts.GetProperties(ctx, "rg", name, nil)
		if err != nil || *got.Properties.ProvisioningState != armstorage.ProvisioningStateSucceeded || got.Properties.StatusOfPrimary == nil {
			t.Fatalf("GET %s: %v %+v", name, err, got.Properties)
		}
		if _, err := c.Storage().Handler(ctx, name+".blob.core.windows.net"); err != nil {
			t.Fatalf("data plane of %s: %v", name, err)
		}
	}
	if !c.Azurite().Ready() {
		t.Fatal("Azurite does not run after the creates")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// The cloud starts again and Azurite cannot: the accounts that were Succeeded end Failed
	// with Azurite's error, never Succeeded with data planes that cannot answer.
	c = cloudtest.Start(t, cloud.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM(), AzuriteDir: broken})
	cred, opts = cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	if accounts, err = armstorage.NewAccountsClient(c.Settings().SubscriptionID, cred, opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"stfailed2", "stnew1", "stnew2"} {
		var state armstorage.ProvisioningState
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			got, err := accounts.GetProperties(ctx, "rg", name, nil)
			if err != nil {
				t.Fatalf("GET %s: %v", name, err)
			}
			if state = *got.Properties.ProvisioningState; state == armstorage.ProvisioningStateFailed {
				break
			}
		}
		if state != armstorage.ProvisioningStateFailed {
			t.Errorf("%s is %s after Azurite failed at the cloud's start, want Failed", name, state)
		}
	}
}
