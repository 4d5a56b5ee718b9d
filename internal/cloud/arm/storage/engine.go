package storage

import (
	"context"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// WatchEngine is called when the cloud starts Azurite for the accounts it already has: should
// Azurite fail to start, every served account ends Failed with Azurite's error, as a create
// does (a PUT of the account retries it). Nothing is recorded when the cloud closes first.
func (p *Provider) WatchEngine() {
	if p.data == nil {
		return
	}
	p.svc.Go("Recording the storage accounts' failure", func(ctx context.Context) error {
		engErr := p.data.WaitEngine(ctx)
		if engErr == nil || ctx.Err() != nil {
			return nil
		}
		return p.markFailed(ctx, engErr)
	})
}

func (p *Provider) markFailed(ctx context.Context, engErr error) error {
	return p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		all, err := arm.ListTx(tx, armid.Root, AccountType)
		if err != nil {
			return err
		}
		for _, res := range all {
			id, err := armid.Parse(res.ID)
			if err != nil {
				return err
			}
			_, err = arm.UpdatePropertiesTx(tx, id, func(_ *arm.Resource, st *stored) error {
				if !st.live() {
					return arm.ErrUnchanged // creating (its operation records the outcome), failed or deleting
				}
				st.State, st.Error = stateFailed, clip(engErr.Error(), 1024)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}
