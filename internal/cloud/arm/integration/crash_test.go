package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// child is a `cerulean-local cloud` process with ARM client options and the Owner's credential for it.
type child struct {
	*cloudtest.Process
	opts *arm.ClientOptions
	cred azcore.TokenCredential
}

// startChild runs the cloud on dataDir and waits for its env file, the readiness signal.
func startChild(t *testing.T, bin, dataDir string) *child {
	t.Helper()
	p := cloudtest.StartProcess(t, bin, dataDir)
	co := p.ClientOptions(t)
	return &child{Process: p, opts: &arm.ClientOptions{ClientOptions: co}, cred: p.OwnerCred(t, co)}
}

// TestKill9UnderConcurrentPUTs: every PUT answered 2xx before a kill -9 is there after restart,
// with the same service-made ids.
func TestKill9UnderConcurrentPUTs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the cerulean binary")
	}
	bin := cloudtest.BuildCeruleanLocal(t)
	dataDir := t.TempDir()
	c := startChild(t, bin, dataDir)
	sub := c.Env["AZURE_SUBSCRIPTION_ID"]
	groups, err := armresources.NewResourceGroupsClient(sub, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(sub, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		acked = map[string]string{} // name -> clientId
		wg    sync.WaitGroup
	)
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	for w := range 8 {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				name := fmt.Sprintf("id-%d-%d", w, i)
				res, err := ids.CreateOrUpdate(loadCtx, "rg", name, armmsi.Identity{Location: ptr("eastus")}, nil)
				if err != nil {
					var re *azcore.ResponseError
					if errors.As(err, &re) {
						t.Errorf("PUT %s: %v", name, err) // the server answered, but not 2xx
					}
					return // connection lost: the process is gone
				}
				mu.Lock()
				acked[name] = *res.Properties.ClientID
				mu.Unlock()
			}
		})
	}
	// Kill once a good number of writes have been acknowledged, mid-stream.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 40 || time.Now().After(deadline) {
			break
		}
	}
	c.Kill(t) // SIGKILL
	wg.Wait()
	stop()
	if len(acked) == 0 {
		t.Fatal("no PUT succeeded before the kill")
	}

	c2 := startChild(t, bin, dataDir)
	ids2, err := armmsi.NewUserAssignedIdentitiesClient(sub, c2.cred, c2.opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, clientID := range acked {
		got, err := ids2.Get(ctx, "rg", name, nil)
		if err != nil {
			t.Errorf("acknowledged %s is gone after kill -9: %v", name, err)
			continue
		}
		if *got.Properties.ClientID != clientID {
			t.Errorf("%s: client id %s, acknowledged %s", name, *got.Properties.ClientID, clientID)
		}
	}
	t.Logf("%d acknowledged PUTs all present after kill -9 and restart", len(acked))
}
