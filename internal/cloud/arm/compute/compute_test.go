package compute_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

type env struct {
	c    *cloud.Cloud
	s    cloud.Settings
	cred azcore.TokenCredential
	opts *arm.ClientOptions // no retries
}

func start(t *testing.T) *env {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM()})
	return &env{c: c, s: c.Settings(), cred: cloudtest.OwnerCred(t, c), opts: cloudtest.ARMOptions(c)}
}

func (e *env) grant(t *testing.T, principalID, role, scope string) {
	t.Helper()
	name := uuid.NewString()
	now := time.Now().UTC()
	if err := e.c.ARM().Authz().Ensure(t.Context(), authz.Assignment{
		ID: authz.AssignmentID(scope, name), Name: name, Scope: scope, RoleDefinitionID: role,
		PrincipalID: principalID, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now,
	}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) group(t *testing.T, name string) string {
	t.Helper()
	return cloudtest.CreateGroup(t, e.c, e.cred, e.opts, "westeurope", name)
}

func (e *env) identity(t *testing.T, rg, name string) armmsi.Identity {
	t.Helper()
	ids, err := armmsi.NewUserAssignedIdentitiesClient(e.s.SubscriptionID, e.cred, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := ids.CreateOrUpdate(t.Context(), rg, name, armmsi.Identity{Location: new("westeurope")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mi.Identity
}

func vms(t *testing.T, e *env, cred azcore.TokenCredential) *armcompute.VirtualMachinesClient {
	t.Helper()
	c, err := armcompute.NewVirtualMachinesClient(e.s.SubscriptionID, cred, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// minimalVM is what a real client sends for a small Linux VM, secrets included.
func minimalVM(e *env, identity *armcompute.VirtualMachineIdentity) armcompute.VirtualMachine {
	nic := "/subscriptions/" + e.s.SubscriptionID + "/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic"
	return armcompute.VirtualMachine{
		Location: new("westeurope"),
		Identity: identity,
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: new(armcompute.VirtualMachineSizeTypes("Standard_B1s"))},
			StorageProfile: &armcompute.StorageProfile{
				ImageReference: &armcompute.ImageReference{Publisher: new("Canonical"), Offer: new("ubuntu-24_04-lts"), SKU: new("server"), Version: new("latest")},
				OSDisk:         &armcompute.OSDisk{CreateOption: new(armcompute.DiskCreateOptionTypesFromImage)},
			},
			OSProfile:      &armcompute.OSProfile{ComputerName: new("vm1"), AdminUsername: new("azureuser"), AdminPassword: new("S3cret-Passw0rd!")},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: &nic}}},
		},
	}
}

func createVM(t *testing.T, c *armcompute.VirtualMachinesClient, rg, name string, vm armcompute.VirtualMachine) (armcompute.VirtualMachine, error) {
	t.Helper()
	p, err := c.BeginCreateOrUpdate(t.Context(), rg, name, vm, nil)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	res, err := p.PollUntilDone(t.Context(), poll)
	return res.VirtualMachine, err
}

func patchVM(t *testing.T, c *armcompute.VirtualMachinesClient, rg, name string, u armcompute.VirtualMachineUpdate) (armcompute.VirtualMachine, error) {
	t.Helper()
	p, err := c.BeginUpdate(t.Context(), rg, name, u, nil)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	res, err := p.PollUntilDone(t.Context(), poll)
	return res.VirtualMachine, err
}

func TestVirtualMachineSystemAssignedIdentity(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	e.group(t, "rg")
	c := vms(t, e, e.cred)
	vm, err := createVM(t, c, "rg", "vm1", minimalVM(e, &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeSystemAssigned)}))
	if err != nil {
		t.Fatal(err)
	}
	if vm.Identity == nil || vm.Identity.PrincipalID == nil || *vm.Identity.TenantID != e.s.TenantID || *vm.Properties.ProvisioningState != "Succeeded" || vm.Properties.VMID == nil {
		t.Fatalf("created VM: %+v", vm)
	}
	got, err := c.Get(ctx, "rg", "VM1", nil) // names are case-insensitive
	if err != nil {
		t.Fatal(err)
	}
	if *got.ID != *vm.ID || *got.Properties.HardwareProfile.VMSize != "Standard_B1s" || got.Properties.OSProfile.AdminPassword != nil {
		t.Fatalf("get: %+v (the admin password must never come back)", got.Properties)
	}
	p, err := e.c.Entra().Directory.PrincipalByObjectID(ctx, e.s.TenantID, *vm.Identity.PrincipalID)
	if err != nil || p.Kind != entra.KindManagedIdentity || p.ResourceID != *vm.ID {
		t.Fatalf("system-assigned principal: %+v, %v", p, err)
	}

	// Dropping the system-assigned identity deletes its principal; so does deleting the VM.
	vm, err = patchVM(t, c, "rg", "vm1", armcompute.VirtualMachineUpdate{Identity: &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeNone)}})
	if err != nil || vm.Identity != nil {
		t.Fatalf("patch to None: %v %+v", err, vm.Identity)
	}
	if _, err := e.c.Entra().Directory.PrincipalByObjectID(ctx, e.s.TenantID, p.ObjectID); !errors.Is(err, entra.ErrNotFound) {
		t.Fatalf("principal after removal: %v", err)
	}
	vm, err = patchVM(t, c, "rg", "vm1", armcompute.VirtualMachineUpdate{Identity: &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeSystemAssigned)}})
	if err != nil || vm.Identity == nil || vm.Identity.PrincipalID == nil {
		t.Fatalf("patch to SystemAssigned: %v %+v", err, vm.Identity)
	}
	dp, err := c.BeginDelete(ctx, "rg", "vm1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Entra().Directory.PrincipalByObjectID(ctx, e.s.TenantID, *vm.Identity.PrincipalID); !errors.Is(err, entra.ErrNotFound) {
		t.Fatalf("principal after VM delete: %v", err)
	}
	_, err = c.Get(ctx, "rg", "vm1", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
}

func TestUserAssignedIdentityNeedsAssignPermission(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	rg := e.group(t, "rg")
	idRG := e.group(t, "rg-identities")
	mi1 := e.identity(t, "rg-identities", "id-one")
	mi2 := e.identity(t, "rg-identities", "id-two")

	// The operator may write VMs in rg but has no role on the identities.
	op, opCred := cloudtest.NewPrincipal(t, e.c, "operator")
	e.grant(t, op.ObjectID, authz.Contributor, rg)
	c := vms(t, e, opCred)
	withUAI := func(ids ...string) *armcompute.VirtualMachineIdentity {
		m := map[string]*armcompute.UserAssignedIdentitiesValue{}
		for _, id := range ids {
			m[id] = &armcompute.UserAssignedIdentitiesValue{}
		}
		return &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeUserAssigned), UserAssignedIdentities: m}
	}
	_, err := createVM(t, c, "rg", "vm1", minimalVM(e, withUAI(*mi1.ID)))
	cloudtest.RespErr(t, err, http.StatusForbidden, "LinkedAuthorizationFailed")
	if !strings.Contains(err.Error(), "userAssignedIdentities/assign/action") {
		t.Errorf("error does not name the action: %v", err)
	}
	_, err = c.Get(ctx, "rg", "vm1", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound") // nothing was written

	// Managed Identity Operator on one identity allows assigning that one only.
	e.grant(t, op.ObjectID, authz.ManagedIdentityOperator, *mi1.ID)
	vm, err := createVM(t, c, "rg", "vm1", minimalVM(e, withUAI(*mi1.ID)))
	if err != nil {
		t.Fatal(err)
	}
	ua := vm.Identity.UserAssignedIdentities[*mi1.ID]
	if ua == nil || *ua.ClientID != *mi1.Properties.ClientID || *ua.PrincipalID != *mi1.Properties.PrincipalID || vm.Identity.PrincipalID != nil {
		t.Fatalf("identity: %+v", vm.Identity)
	}
	_, err = patchVM(t, c, "rg", "vm1", armcompute.VirtualMachineUpdate{Identity: withUAI(*mi2.ID)})
	cloudtest.RespErr(t, err, http.StatusForbidden, "LinkedAuthorizationFailed")

	// On the identities' group it covers both; a PATCH adds one and keeps the other.
	e.grant(t, op.ObjectID, authz.ManagedIdentityOperator, idRG)
	vm, err = patchVM(t, c, "rg", "vm1", armcompute.VirtualMachineUpdate{Identity: withUAI(*mi2.ID)})
	if err != nil || len(vm.Identity.UserAssignedIdentities) != 2 {
		t.Fatalf("patch add: %v %+v", err, vm.Identity)
	}
	// A null entry removes one; adding the system-assigned identity keeps the rest.
	vm, err = patchVM(t, c, "rg", "vm1", armcompute.VirtualMachineUpdate{Identity: &armcompute.VirtualMachineIdentity{
		Type:                   new(armcompute.ResourceIdentityTypeSystemAssignedUserAssigned),
		UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*mi1.ID: nil},
	}})
	if err != nil || len(vm.Identity.UserAssignedIdentities) != 1 || vm.Identity.UserAssignedIdentities[*mi2.ID] == nil || vm.Identity.PrincipalID == nil {
		t.Fatalf("patch remove: %v %+v", err, vm.Identity)
	}
	if *vm.Identity.Type != armcompute.ResourceIdentityTypeSystemAssignedUserAssigned {
		t.Fatalf("type: %v", *vm.Identity.Type)
	}
	// Tags alone leave the identity alone.
	vm, err = patchVM(t, c, "rg", "vm1", armcompute.VirtualMachineUpdate{Tags: map[string]*string{"team": new("a")}})
	if err != nil || vm.Identity == nil || len(vm.Identity.UserAssignedIdentities) != 1 || *vm.Tags["team"] != "a" {
		t.Fatalf("patch tags: %v %+v", err, vm)
	}
}

func TestScaleSetIdentities(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	e.group(t, "rg")
	mi := e.identity(t, "rg", "id-nodes")
	c, err := armcompute.NewVirtualMachineScaleSetsClient(e.s.SubscriptionID, e.cred, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.BeginCreateOrUpdate(ctx, "rg", "vmss1", armcompute.VirtualMachineScaleSet{
		Location: new("westeurope"),
		SKU:      &armcompute.SKU{Name: new("Standard_B2s"), Capacity: new(int64(2))},
		Identity: &armcompute.VirtualMachineScaleSetIdentity{
			Type:                   new(armcompute.ResourceIdentityTypeSystemAssignedUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*mi.ID: {}},
		},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: new("node"), AdminUsername: new("azureuser"), AdminPassword: new("S3cret-Passw0rd!")},
			},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	ss := res.VirtualMachineScaleSet
	if ss.Identity == nil || ss.Identity.PrincipalID == nil || ss.Identity.UserAssignedIdentities[*mi.ID] == nil || *ss.SKU.Capacity != 2 || ss.Properties.UniqueID == nil {
		t.Fatalf("scale set: %+v", ss)
	}
	if ss.Properties.VirtualMachineProfile.OSProfile.AdminPassword != nil {
		t.Fatal("the admin password came back")
	}
	// Deleting the group deletes the scale set and its system-assigned principal.
	groups, err := armresources.NewResourceGroupsClient(e.s.SubscriptionID, e.cred, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := groups.BeginDelete(ctx, "rg", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Entra().Directory.PrincipalByObjectID(ctx, e.s.TenantID, *ss.Identity.PrincipalID); !errors.Is(err, entra.ErrNotFound) {
		t.Fatalf("principal after group delete: %v", err)
	}
}

func TestBadIdentityInput(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	e.group(t, "rg")
	c := vms(t, e, e.cred)
	sub := "/subscriptions/" + e.s.SubscriptionID
	missing := sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/nope"
	for _, tc := range []struct {
		name     string
		identity *armcompute.VirtualMachineIdentity
		code     string
	}{
		{"unknown type", &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityType("Magic"))}, "InvalidIdentityType"},
		{"user-assigned without identities", &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeUserAssigned)}, "InvalidIdentityValues"},
		{"not an identity id", &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{sub + "/resourceGroups/rg": {}}}, "InvalidIdentityValues"},
		{"identities without the type", &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeSystemAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{missing: {}}}, "InvalidIdentityValues"},
		{"missing identity", &armcompute.VirtualMachineIdentity{Type: new(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{missing: {}}}, "FailedIdentityOperation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := createVM(t, c, "rg", "vm1", minimalVM(e, tc.identity))
			cloudtest.RespErr(t, err, http.StatusBadRequest, tc.code)
			_, err = c.Get(ctx, "rg", "vm1", nil)
			cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
		})
	}
	_, err := createVM(t, c, "rg", "-bad-", minimalVM(e, nil))
	cloudtest.RespErr(t, err, http.StatusBadRequest, "InvalidResourceName")
	vm := minimalVM(e, nil)
	vm.Location = nil
	_, err = createVM(t, c, "rg", "vm1", vm)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "LocationRequired")
	_, err = patchVM(t, c, "rg", "absent", armcompute.VirtualMachineUpdate{Tags: map[string]*string{"a": new("b")}})
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
}

var poll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}
