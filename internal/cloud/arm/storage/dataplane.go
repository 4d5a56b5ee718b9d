package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/storage"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// DataPlane is what the provider asks of the storage data planes: an account's data goes with
// the account, and containers, queues and tables are served from there.
type DataPlane interface {
	DeleteAccountData(ctx context.Context, account string) error
	// EngineReady reports, without waiting, whether the engine (Azurite) serves; WaitEngine
	// starts it when needed and returns why it did not start. An account's create waits for it.
	EngineReady() bool
	WaitEngine(ctx context.Context) error
	Children
}

// SetDataPlane connects the data planes (the cloud does it once both exist).
func (p *Provider) SetDataPlane(d DataPlane) { p.data = d }

// Account finds a storage account by name, for the data planes' front: its ARM id (the scope of
// data role assignments), tenant and decoded keys.
func (p *Provider) Account(ctx context.Context, name string) (storage.Account, error) {
	var out storage.Account
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		all, err := arm.ListTx(tx, armid.Root, AccountType)
		if err != nil {
			return err
		}
		for _, a := range all {
			if !strings.EqualFold(a.Name, name) {
				continue
			}
			var st stored
			if err := json.Unmarshal(a.Properties, &st); err != nil {
				return err
			}
			if !st.live() {
				return storage.ErrAccountNotFound // being created, or failed: not served, as its name does not resolve in Azure
			}
			out = storage.Account{Name: strings.ToLower(a.Name), ID: a.ID, TenantID: p.svc.TenantID()}
			for _, k := range st.Keys {
				b, err := base64.StdEncoding.DecodeString(k.Value)
				if err != nil {
					return err
				}
				out.Keys = append(out.Keys, b)
			}
			return nil
		}
		return storage.ErrAccountNotFound
	})
	return out, err
}

// Accounts lists the names of every storage account (the cloud starts Azurite when there is one).
func (p *Provider) Accounts(ctx context.Context) ([]string, error) {
	var names []string
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		all, err := arm.ListTx(tx, armid.Root, AccountType)
		for _, a := range all {
			names = append(names, a.Name)
		}
		return err
	})
	return names, err
}

// Children are an account's containers, queues and tables (kind: storage.Containers, ...), as
// the data plane holds them.
type Children interface {
	PutChild(ctx context.Context, account, kind, name string) error
	ChildExists(ctx context.Context, account, kind, name string) (bool, error)
	DeleteChild(ctx context.Context, account, kind, name string) (bool, error)
	ListChildren(ctx context.Context, account, kind string) ([]string, error)
}
