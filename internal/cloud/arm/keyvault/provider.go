// Package keyvault is the Microsoft.KeyVault provider of the local cloud's ARM: vaults (created
// as a long-running operation the SDK poller follows), their accessPolicies sub-resource, soft
// delete with deleted vaults that can be listed, recovered (createMode "recover") and purged (a
// long-running operation, as in Azure), and the name check. Every vault change is written, in the same transaction, to the ARM resource and
// to the data plane's registry (package cloud/keyvault), whose listener it then starts or stops.
package keyvault

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	kv "github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	VaultType        = "Microsoft.KeyVault/vaults"
	accessPolicyType = "Microsoft.KeyVault/vaults/accessPolicies"
	deletedListType  = "Microsoft.KeyVault/deletedVaults"
	deletedType      = "Microsoft.KeyVault/locations/deletedVaults"
	purgeType        = "Microsoft.KeyVault/locations/deletedVaults/purge"
	nameCheckType    = "Microsoft.KeyVault/checkNameAvailability"
)

// Versions are the api-versions accepted: armkeyvault 2024-11-01, @azure/arm-keyvault 5 2026-02-01,
// azure-mgmt-keyvault 14.0 2025-05-01, Azure.ResourceManager.KeyVault 1.5 2026-05-15, ASO 2023-07-01,
// the Debian az CLI 2.45 2022-07-01, and the other published versions of Microsoft.KeyVault
// (integration.TestSDKDefaultAPIVersionsAccepted holds the SDK defaults).
var Versions = []string{
	"2015-06-01", "2016-10-01", "2018-02-14", "2019-09-01", "2021-04-01-preview", "2021-06-01-preview",
	"2021-10-01", "2021-11-01-preview", "2022-02-01-preview", "2022-07-01", "2022-11-01", "2023-02-01",
	"2023-07-01", "2023-08-01-preview", "2024-04-01-preview", "2024-11-01", "2024-12-01-preview", "2025-05-01",
	"2026-02-01", "2026-05-15",
}

// Provider serves Microsoft.KeyVault.
type Provider struct {
	svc *arm.Service
	kv  *kv.Service
	log *slog.Logger
	wg  sync.WaitGroup // provisioning completions in flight
}

// Register adds the provider's types and routes to svc; data is the data plane whose vault
// listeners it starts and stops.
func Register(svc *arm.Service, data *kv.Service, log *slog.Logger) *Provider {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{svc: svc, kv: data, log: log}
	for _, t := range []string{VaultType, accessPolicyType, deletedListType, deletedType, purgeType, nameCheckType} {
		svc.RegisterType(arm.Type{Name: t, APIVersions: Versions})
	}
	const (
		sub     = "/subscriptions/{subscriptionId}"
		rg      = sub + "/resourceGroups/rg-example"
		vault   = rg + "/providers/Microsoft.KeyVault/vaults/kv-example"
		deleted = sub + "/providers/Microsoft.KeyVault/locations/eastus/deletedVaults/kv-example"
		va      = "Microsoft.KeyVault/vaults/"
	)
	atSubscription := func(*arm.Request) string { return "/subscriptions/" + svc.SubscriptionID() }
	atVault := func(r *arm.Request) string { return r.ID.Parent().String() }
	for _, rt := range []arm.Route{
		{Method: http.MethodPut, Type: VaultType, Action: va + "write", Handle: p.putVault, Example: vault},
		{Method: http.MethodPatch, Type: VaultType, Action: va + "write", Handle: p.patchVault, Example: vault},
		{Method: http.MethodGet, Type: VaultType, Action: va + "read", Handle: p.getVault, Example: vault},
		{Method: http.MethodDelete, Type: VaultType, Action: va + "delete", Handle: p.deleteVault, Example: vault},
		{Method: http.MethodGet, Type: VaultType, Collection: true, Action: va + "read", Handle: p.listVaults, Example: rg + "/providers/Microsoft.KeyVault/vaults"},
		{Method: http.MethodPut, Type: accessPolicyType, Action: va + "accessPolicies/write", Scope: atVault, Handle: p.updateAccessPolicies, Example: vault + "/accessPolicies/add"},
		{Method: http.MethodGet, Type: deletedListType, Collection: true, Action: "Microsoft.KeyVault/deletedVaults/read", Scope: atSubscription, Handle: p.listDeleted, Example: sub + "/providers/Microsoft.KeyVault/deletedVaults"},
		{Method: http.MethodGet, Type: deletedType, Action: "Microsoft.KeyVault/deletedVaults/read", Scope: atSubscription, Handle: p.getDeleted, Example: deleted},
		{Method: http.MethodPost, Type: purgeType, Collection: true, Action: "Microsoft.KeyVault/locations/deletedVaults/purge/action", Scope: atSubscription, Handle: p.purgeDeleted, Example: deleted + "/purge"},
		{Method: http.MethodPost, Type: nameCheckType, Collection: true, Action: "Microsoft.KeyVault/checkNameAvailability/read", Scope: atSubscription, Handle: p.checkName, Example: sub + "/providers/Microsoft.KeyVault/checkNameAvailability"},
	} {
		svc.Handle(rt)
	}
	svc.RegisterOperation(opPurge, p.runPurge)
	// A vault deleted with its resource group is soft-deleted like one deleted on its own.
	svc.OnDelete(VaultType, func(tx *store.Tx, r arm.Resource) error { return p.softDeleteTx(tx, r) })
	return p
}

// Start finishes provisioning that a stop interrupted; call it after the data plane's Start.
func (p *Provider) Start(ctx context.Context) error { return p.finishPending(ctx) }

// Close waits for provisioning completions in flight.
func (p *Provider) Close() { p.wg.Wait() }
