package keyvault

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	kv "github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// pollAfter is the Retry-After of a vault still provisioning: its listener is already up, so
// the SDK poller need not wait its default 30 s.
const pollAfter = 200 * time.Millisecond

// placed checks that a vault id is where vaults live: directly in a resource group.
func placed(id armid.ID, depth int) error {
	if id.ResourceGroup() == "" || len(id.Segments) != depth {
		return arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", id.ResourceType())
	}
	return nil
}

// live reports whether a registry entry still holds its name: active, or deleted and not yet
// past its scheduled purge date.
func live(v kv.Vault, now time.Time) bool { return !v.IsDeleted() || now.Before(v.PurgeAt) }

func (p *Provider) putVault(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	name := r.ID.Name()
	if !validName(name) {
		return httpx.Response{}, errVaultName(name)
	}
	var b vaultBody
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if err := validateCreate(&b); err != nil {
		return httpx.Response{}, err
	}
	if !strings.EqualFold(b.Properties.TenantID, p.svc.TenantID()) {
		return httpx.Response{}, arm.ErrBadRequest("The tenant '%s' is not the tenant of subscription '%s'.", b.Properties.TenantID, p.svc.SubscriptionID())
	}
	if b.Properties.CreateMode != nil && strings.EqualFold(*b.Properties.CreateMode, "recover") && !p.active(ctx, r.ID) {
		return p.recoverVault(ctx, r, b)
	}
	// The port is bound before the transaction so the vaultUri it records is known to be free.
	res, err := p.kv.Reserve()
	if err != nil {
		return httpx.Response{}, err
	}
	var out arm.Resource
	created := false
	err = p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		if err := arm.CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		now := p.svc.Now()
		props := *b.Properties
		props.CreateMode = nil
		loc := arm.NormalizeLocation(b.Location)
		v, err := kv.GetVaultTx(tx, name)
		switch {
		case errors.Is(err, kv.ErrVaultNotFound):
		case err != nil:
			return err
		case !live(v, now):
			if err := kv.PurgeVaultTx(tx, name); err != nil {
				return err
			}
		case v.IsDeleted():
			return arm.Errorf(http.StatusConflict, "ConflictError",
				"A vault with the same name already exists in deleted state. You need to either recover or purge existing key vault. Follow this link https://go.microsoft.com/fwlink/?linkid=2149745 for more information on soft delete.")
		case !strings.EqualFold(v.ResourceID, r.ID.String()):
			return errNameTaken(name)
		default:
			out, _, err = p.updateTx(tx, r.ID, func(cur *arm.Resource, stored *vaultProperties) error {
				if cur.Location != loc {
					return arm.Errorf(http.StatusBadRequest, "InvalidResourceLocation",
						"The resource '%s' already exists in location '%s' in resource group '%s'. A resource with the same name cannot be created in location '%s'.", name, cur.Location, r.ID.ResourceGroup(), loc)
				}
				old := *stored
				if err := validateFlags(&props, &old); err != nil {
					return err
				}
				props.VaultURI, props.ProvisioningState = old.VaultURI, old.ProvisioningState
				cur.Tags = b.Tags
				*stored = props
				return nil
			})
			return err
		}
		if err := validateFlags(&props, nil); err != nil {
			return err
		}
		props.VaultURI, props.ProvisioningState = kv.VaultURI(res.Port), stateRegistering
		created = true
		out, err = p.putTx(tx, arm.Resource{ID: r.ID.String(), Name: name, Type: VaultType, Location: loc, Tags: b.Tags}, props, res.Port)
		return err
	})
	if err != nil || !created {
		res.Release()
	}
	if err != nil {
		return httpx.Response{}, err
	}
	if !created {
		return httpx.Response{Body: viewFor(ctx)(out)}, nil
	}
	p.kv.Activate(name, res)
	p.finishLater(r.ID)
	return httpx.Response{Status: http.StatusCreated, Body: viewFor(ctx)(out), Header: retryHeader()}, nil
}

// active reports whether the vault at id exists and is not deleted: a repeated PUT with
// createMode "recover" (a reconciler re-applying its spec) then updates it like any PUT.
func (p *Provider) active(ctx context.Context, id armid.ID) bool {
	found := false
	_ = p.svc.Store().View(ctx, func(tx *store.Tx) error {
		v, err := kv.GetVaultTx(tx, id.Name())
		found = err == nil && !v.IsDeleted() && strings.EqualFold(v.ResourceID, id.String())
		return nil
	})
	return found
}

func retryHeader() http.Header {
	return http.Header{"Retry-After-Ms": {"200"}, "Retry-After": {"1"}}
}

func errNameTaken(name string) *arm.Error {
	return arm.Errorf(http.StatusConflict, "VaultAlreadyExists",
		"The vault name '%s' is already in use. Vault names are globally unique so it is possible that the name is already taken. If you are sure that the vault name was not taken then it is possible that a vault with the same name was recently deleted but not purged after being placed in a recoverable state. If the vault is in a recoverable state then the vault will need to be purged before reusing the name.", name)
}

// putTx writes the ARM resource and the data plane's registry entry together.
func (p *Provider) putTx(tx *store.Tx, res arm.Resource, props vaultProperties, port int) (arm.Resource, error) {
	raw, err := json.Marshal(props)
	if err != nil {
		return res, err
	}
	res.Properties = raw
	if err := arm.PutTx(tx, res); err != nil {
		return res, err
	}
	return res, kv.PutVaultTx(tx, registryOf(res, props, port))
}

// updateTx changes the stored vault id through arm.UpdatePropertiesTx and writes the data
// plane's registry entry with it, as putTx does; edit's arm.ErrUnchanged writes neither.
func (p *Provider) updateTx(tx *store.Tx, id armid.ID, edit func(cur *arm.Resource, props *vaultProperties) error) (arm.Resource, vaultProperties, error) {
	var port int
	var props vaultProperties
	changed := false
	res, err := arm.UpdatePropertiesTx(tx, id, func(cur *arm.Resource, pr *vaultProperties) error {
		v, err := kv.GetVaultTx(tx, cur.Name)
		if err != nil {
			return err
		}
		if err := edit(cur, pr); err != nil {
			return err
		}
		port, props, changed = v.Port, *pr, true
		return nil
	})
	if err != nil || !changed {
		return res, props, err
	}
	return res, props, kv.PutVaultTx(tx, registryOf(res, props, port))
}

// finishLater completes a new vault's provisioning in the background, as Azure does once the
// vault's DNS name is registered; Start completes any that a stop interrupted.
func (p *Provider) finishLater(id armid.ID) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		time.Sleep(pollAfter / 2)
		err := p.svc.Store().Update(ctx, func(tx *store.Tx) error { return p.finishTx(tx, id) })
		if err != nil {
			p.log.Warn("Completing vault provisioning failed", "vault", id.Name(), "err", err)
		}
	}()
}

func (p *Provider) finishTx(tx *store.Tx, id armid.ID) error {
	_, _, err := p.updateTx(tx, id, func(_ *arm.Resource, props *vaultProperties) error {
		if props.ProvisioningState != stateRegistering {
			return arm.ErrUnchanged
		}
		props.ProvisioningState = stateSucceeded
		return nil
	})
	if arm.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

func (p *Provider) finishPending(ctx context.Context) error {
	return p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		vaults, err := kv.VaultsTx(tx)
		if err != nil {
			return err
		}
		for _, v := range vaults {
			if v.IsDeleted() {
				continue
			}
			id, err := armid.Parse(v.ResourceID)
			if err != nil {
				return err
			}
			if err := p.finishTx(tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *Provider) getVault(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	res, err := p.svc.GetInGroup(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	v := viewFor(ctx)(res)
	out := httpx.Response{Body: v}
	if v.Properties.ProvisioningState == stateRegistering {
		out.Header = retryHeader()
	}
	return out, nil
}

func (p *Provider) patchVault(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	var b patchBody
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if err := arm.ValidateTags(b.Tags); err != nil {
		return httpx.Response{}, err
	}
	if b.Properties != nil && b.Properties.AccessPolicies != nil {
		if err := validatePolicies(b.Properties.AccessPolicies); err != nil {
			return httpx.Response{}, err
		}
	}
	var out arm.Resource
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		if err := arm.CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		var err error
		out, _, err = p.updateTx(tx, r.ID, func(cur *arm.Resource, props *vaultProperties) error {
			old := *props
			merged, err := merge(old, b.Properties)
			if err != nil {
				return err
			}
			if err := validateFlags(&merged, &old); err != nil {
				return err
			}
			if b.Tags != nil {
				cur.Tags = b.Tags
			}
			*props = merged
			return nil
		})
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: viewFor(ctx)(out)}, nil
}

// merge applies the properties a PATCH names to the current ones.
func merge(old vaultProperties, upd *vaultProperties) (vaultProperties, error) {
	p := old
	if upd == nil {
		return p, nil
	}
	if upd.TenantID != "" && !strings.EqualFold(upd.TenantID, old.TenantID) {
		return p, arm.ErrBadRequest("The 'tenantId' of a vault cannot be changed.")
	}
	if upd.SKU != nil {
		b := vaultBody{Location: "x", Properties: &vaultProperties{TenantID: old.TenantID, SKU: upd.SKU}}
		if err := validateCreate(&b); err != nil {
			return p, err
		}
		p.SKU = b.Properties.SKU
	}
	if upd.AccessPolicies != nil {
		p.AccessPolicies = upd.AccessPolicies
	}
	for _, f := range []struct{ dst, src **bool }{
		{&p.EnabledForDeployment, &upd.EnabledForDeployment}, {&p.EnabledForDiskEncryption, &upd.EnabledForDiskEncryption},
		{&p.EnabledForTemplateDeployment, &upd.EnabledForTemplateDeployment}, {&p.EnableSoftDelete, &upd.EnableSoftDelete},
		{&p.EnableRbacAuthorization, &upd.EnableRbacAuthorization}, {&p.EnablePurgeProtection, &upd.EnablePurgeProtection},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
	if upd.SoftDeleteRetentionInDays != nil {
		p.SoftDeleteRetentionInDays = upd.SoftDeleteRetentionInDays
	}
	if upd.NetworkACLs != nil {
		p.NetworkACLs = upd.NetworkACLs
	}
	if upd.PublicNetworkAccess != nil {
		p.PublicNetworkAccess = upd.PublicNetworkAccess
	}
	return p, nil
}

func (p *Provider) deleteVault(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	found, err := p.svc.DeleteIfPresent(ctx, r.ID) // runs softDeleteTx through the OnDelete hook
	if err != nil {
		return httpx.Response{}, err
	}
	if found {
		p.kv.Stop(r.ID.Name())
	}
	return arm.Deleted(found), nil
}

// softDeleteTx moves a deleted vault resource to the deleted vaults, with a snapshot for its
// recovery; its secrets stay until it is purged.
func (p *Provider) softDeleteTx(tx *store.Tx, r arm.Resource) error {
	snap, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = kv.SoftDeleteVaultTx(tx, r.Name, p.svc.Now(), snap)
	if errors.Is(err, kv.ErrVaultNotFound) {
		return nil
	}
	return err
}

type list[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

func (p *Provider) listVaults(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	all, err := p.svc.List(ctx, r.ID, VaultType, arm.GroupExistsTx)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, viewFor(ctx)), nil
}
