package podidentity

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/cerulean/cerulean/internal/podidentity"
)

// Compute is the ARM calls the controller makes on a node's VM or scale set.
type Compute interface {
	// Identities reads the resource's identity: whether it has a system-assigned one and its
	// user-assigned identity ids.
	Identities(ctx context.Context, c podidentity.Compute) (system bool, user []string, err error)
	// Update adds and removes user-assigned identities in one PATCH of
	// identity.userAssignedIdentities; system and remaining say what the resource keeps.
	Update(ctx context.Context, c podidentity.Compute, system bool, add, remove []string, remaining int) error
}

// ARMCompute is Compute through the Azure SDK's compute clients.
type ARMCompute struct {
	Credential azcore.TokenCredential
	Options    *arm.ClientOptions
	// PollFrequency is the long-running operation poll interval (default 1s; the SDK refuses
	// less outside tests).
	PollFrequency time.Duration
	// Patches counts the PATCH requests made (read by tests and benchmarks).
	Patches func()

	mu  sync.Mutex
	vms map[string]*armcompute.VirtualMachinesClient
	sss map[string]*armcompute.VirtualMachineScaleSetsClient
}

func (a *ARMCompute) clients(sub string) (*armcompute.VirtualMachinesClient, *armcompute.VirtualMachineScaleSetsClient, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.vms == nil {
		a.vms, a.sss = map[string]*armcompute.VirtualMachinesClient{}, map[string]*armcompute.VirtualMachineScaleSetsClient{}
	}
	if a.vms[sub] == nil {
		vm, err := armcompute.NewVirtualMachinesClient(sub, a.Credential, a.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("create VM client: %w", err)
		}
		ss, err := armcompute.NewVirtualMachineScaleSetsClient(sub, a.Credential, a.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("create scale set client: %w", err)
		}
		a.vms[sub], a.sss[sub] = vm, ss
	}
	return a.vms[sub], a.sss[sub], nil
}

// Identities implements Compute.
func (a *ARMCompute) Identities(ctx context.Context, c podidentity.Compute) (bool, []string, error) {
	vms, sss, err := a.clients(c.SubscriptionID)
	if err != nil {
		return false, nil, err
	}
	var typ *armcompute.ResourceIdentityType
	var users map[string]*armcompute.UserAssignedIdentitiesValue
	if c.ScaleSet {
		res, err := sss.Get(ctx, c.ResourceGroup, c.Name, nil)
		if err != nil {
			return false, nil, fmt.Errorf("get scale set: %w", err)
		}
		if res.Identity != nil {
			typ, users = res.Identity.Type, res.Identity.UserAssignedIdentities
		}
	} else {
		res, err := vms.Get(ctx, c.ResourceGroup, c.Name, nil)
		if err != nil {
			return false, nil, fmt.Errorf("get VM: %w", err)
		}
		if res.Identity != nil {
			typ, users = res.Identity.Type, res.Identity.UserAssignedIdentities
		}
	}
	system := typ != nil && strings.Contains(strings.ToLower(string(*typ)), "systemassigned")
	out := make([]string, 0, len(users))
	for id := range users {
		out = append(out, id)
	}
	return system, out, nil
}

// Update implements Compute.
func (a *ARMCompute) Update(ctx context.Context, c podidentity.Compute, system bool, add, remove []string, remaining int) error {
	vms, sss, err := a.clients(c.SubscriptionID)
	if err != nil {
		return err
	}
	users := map[string]*armcompute.UserAssignedIdentitiesValue{}
	for _, id := range add {
		users[id] = &armcompute.UserAssignedIdentitiesValue{}
	}
	for _, id := range remove {
		users[id] = nil // JSON null: remove this identity, keep the others
	}
	var typ armcompute.ResourceIdentityType
	switch {
	case system && remaining > 0:
		typ = armcompute.ResourceIdentityTypeSystemAssignedUserAssigned
	case system:
		typ = armcompute.ResourceIdentityTypeSystemAssigned
	case remaining > 0:
		typ = armcompute.ResourceIdentityTypeUserAssigned
	default:
		typ = armcompute.ResourceIdentityTypeNone
	}
	if a.Patches != nil {
		a.Patches()
	}
	freq := a.PollFrequency
	if freq <= 0 {
		freq = time.Second
	}
	poll := &runtime.PollUntilDoneOptions{Frequency: freq}
	if c.ScaleSet {
		p, err := sss.BeginUpdate(ctx, c.ResourceGroup, c.Name, armcompute.VirtualMachineScaleSetUpdate{
			Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: &typ, UserAssignedIdentities: users}}, nil)
		if err == nil {
			_, err = p.PollUntilDone(ctx, poll)
		}
		if err != nil {
			return fmt.Errorf("update scale set identities: %w", err)
		}
		return nil
	}
	p, err := vms.BeginUpdate(ctx, c.ResourceGroup, c.Name, armcompute.VirtualMachineUpdate{
		Identity: &armcompute.VirtualMachineIdentity{Type: &typ, UserAssignedIdentities: users}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, poll)
	}
	if err != nil {
		return fmt.Errorf("update VM identities: %w", err)
	}
	return nil
}
