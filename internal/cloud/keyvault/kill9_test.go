package keyvault_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// childCloud is a `cerulean-local cloud` process with client options and the Owner's credential for it.
type childCloud struct {
	*cloudtest.Process
	opts azcore.ClientOptions
	cred azcore.TokenCredential
}

// startChild starts `cerulean-local cloud` on a free port and waits for its env file.
func startChild(t *testing.T, bin, dir string) *childCloud {
	t.Helper()
	c := &childCloud{Process: cloudtest.StartProcess(t, bin, dir)}
	c.opts = c.ClientOptions(t)
	c.cred = c.OwnerCred(t, c.opts)
	return c
}

func (c *childCloud) secrets(t *testing.T, uri string) *azsecrets.Client {
	t.Helper()
	sc, err := azsecrets.NewClient(uri, c.cred, &azsecrets.ClientOptions{ClientOptions: c.opts, DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestSecretsSurviveKill9 kills a child `cerulean-local cloud` with SIGKILL under concurrent secret
// writes, restarts it on the same data directory, and reads back every version it acknowledged,
// at the same vaultUri.
func TestSecretsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := cloudtest.BuildCeruleanLocal(t)
	dir := filepath.Join(t.TempDir(), "cloud")
	c := startChild(t, bin, dir)
	ctx := t.Context()
	sub := c.Env["AZURE_SUBSCRIPTION_ID"]
	armOpts := &arm.ClientOptions{ClientOptions: c.opts}
	groups, err := armresources.NewResourceGroupsClient(sub, c.cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	vaults, err := armkeyvault.NewVaultsClient(sub, c.cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, "rg", "kv-durable", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(c.Env["AZURE_TENANT_ID"]), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ras, err := armauthorization.NewRoleAssignmentsClient(sub, c.cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	objectID := ""
	if p, err := c.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{vaultScope}}); err == nil {
		objectID = claim(t, p.Token, "oid")
	}
	_, err = ras.Create(ctx, *v.ID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.Authorization/roleDefinitions/" + roleSecretsOfficer),
		PrincipalID:      to.Ptr(objectID),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := *v.Properties.VaultURI
	sc := c.secrets(t, uri)

	type ack struct{ name, version, value string }
	var (
		mu      sync.Mutex
		acked   []ack
		enough  = make(chan struct{})
		once    sync.Once
		wg      sync.WaitGroup
		failure error
	)
	const writers, killAfter = 8, 80
	for g := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				name, value := fmt.Sprintf("w%d", g), fmt.Sprintf("value-%d-%d", g, i)
				res, err := sc.SetSecret(ctx, name, azsecrets.SetSecretParameters{Value: to.Ptr(value)}, nil)
				if err != nil {
					var re *azcore.ResponseError
					if errors.As(err, &re) {
						mu.Lock()
						failure = err
						mu.Unlock()
					}
					return // the cloud is gone
				}
				mu.Lock()
				acked = append(acked, ack{name, res.ID.Version(), value})
				if len(acked) >= killAfter {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		t.Fatalf("writers stalled (%v)", failure)
	}
	c.Kill(t) // SIGKILL: no shutdown path runs
	wg.Wait()
	if failure != nil {
		t.Fatalf("a write failed before the kill: %v", failure)
	}

	c2 := startChild(t, bin, dir)
	got, err := armkeyvault.NewVaultsClient(sub, c2.cred, &arm.ClientOptions{ClientOptions: c2.opts})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := got.Get(ctx, "rg", "kv-durable", nil)
	if err != nil || *v2.Properties.VaultURI != uri {
		t.Fatalf("vaultUri after restart = %v (%v), want %s", v2.Properties, err, uri)
	}
	sc2 := c2.secrets(t, uri)
	for _, a := range acked {
		s, err := sc2.GetSecret(ctx, a.name, a.version, nil)
		if err != nil || *s.Value != a.value {
			t.Errorf("acknowledged %s/%s lost after kill -9: %v", a.name, a.version, err)
		}
	}
	t.Logf("%d acknowledged secret versions survived kill -9", len(acked))
}

// claim reads one string claim of a JWT (the test's own token; no verification needed).
func claim(t *testing.T, token, name string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatal("token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	v, _ := claims[name].(string)
	return v
}
