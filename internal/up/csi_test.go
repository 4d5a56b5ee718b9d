package up

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// The CSI provider's useVMManagedIdentity under up: the identities assigned to the node's scale
// set (chosen by client id or resource id) get Key Vault tokens from the scale set's endpoint; an
// identity not assigned to it gets none.
func TestNodeIdentityIsTheScaleSets(t *testing.T) {
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := az.Settings()
	ctx := t.Context()
	owner := cloudtest.OwnerCred(t, az)
	opts := cloudtest.ARMOptions(az)
	cloudtest.CreateGroup(t, az, owner, opts, "westus2", "nodes")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, opts)
	if err != nil {
		t.Fatal(err)
	}
	identity := func(name string) armmsi.Identity {
		res, err := ids.CreateOrUpdate(ctx, "nodes", name, armmsi.Identity{Location: to.Ptr("westus2")}, nil)
		if err != nil {
			t.Fatalf("create identity %s: %v", name, err)
		}
		return res.Identity
	}
	nodes, stranger := identity("nodes"), identity("stranger")
	sets, err := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, owner, opts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := sets.BeginCreateOrUpdate(ctx, "nodes", "vmss", armcompute.VirtualMachineScaleSet{Location: to.Ptr("westus2"),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*nodes.ID: {}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	imds, err := scaleSetIMDS(az, "azure://"+*set.ID+"/virtualMachines/0")
	if err != nil {
		t.Fatal(err)
	}
	vault := policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}}
	for _, sel := range []string{*nodes.Properties.ClientID, *nodes.ID} {
		tok, err := newNodeIdentity(imds, sel).GetToken(ctx, vault)
		if err != nil {
			t.Fatalf("token of the scale set's identity (%s): %v", sel, err)
		}
		var c struct {
			jwt.RegisteredClaims
			OID string `json:"oid"`
		}
		if _, _, err := jwt.NewParser().ParseUnverified(tok.Token, &c); err != nil {
			t.Fatal(err)
		}
		if c.OID != *nodes.Properties.PrincipalID || len(c.Audience) != 1 || c.Audience[0] != "https://vault.azure.net" || !tok.ExpiresOn.After(time.Now()) {
			t.Errorf("token by %s: oid %s aud %v expires %v, want oid %s for https://vault.azure.net", sel, c.OID, c.Audience, tok.ExpiresOn, *nodes.Properties.PrincipalID)
		}
	}
	if _, err := newNodeIdentity(imds, *stranger.Properties.ClientID).GetToken(ctx, vault); err == nil || !strings.Contains(err.Error(), "Identity not found") {
		t.Errorf("token of an identity not on the scale set: %v, want Identity not found", err)
	}
	if _, err := newNodeIdentity(imds, "").GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"a/.default", "b/.default"}}); err == nil {
		t.Error("two scopes: no error")
	}
}
