package keyvault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	kv "github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

type deletedProperties struct {
	VaultID                string            `json:"vaultId"`
	Location               string            `json:"location"`
	DeletionDate           time.Time         `json:"deletionDate"`
	ScheduledPurgeDate     time.Time         `json:"scheduledPurgeDate"`
	Tags                   map[string]string `json:"tags,omitempty"`
	PurgeProtectionEnabled bool              `json:"purgeProtectionEnabled"`
}

type deletedJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Properties deletedProperties `json:"properties"`
}

func (p *Provider) deletedView(v kv.Vault) deletedJSON {
	var snap arm.Resource
	_ = json.Unmarshal(v.Snapshot, &snap)
	return deletedJSON{
		ID:   "/subscriptions/" + p.svc.SubscriptionID() + "/providers/Microsoft.KeyVault/locations/" + v.Location + "/deletedVaults/" + v.Name,
		Name: v.Name, Type: deletedType,
		Properties: deletedProperties{
			VaultID: v.ResourceID, Location: v.Location, DeletionDate: v.Deleted, ScheduledPurgeDate: v.PurgeAt,
			Tags: snap.Tags, PurgeProtectionEnabled: v.PurgeProtection,
		},
	}
}

func errDeletedNotFound(name string) *arm.Error {
	return arm.Errorf(http.StatusNotFound, "ResourceNotFound", "The deleted vault '%s' could not be found.", clipName(name))
}

// deletedVault returns the soft-deleted vault of that name and location.
func (p *Provider) deletedVaultTx(tx *store.Tx, location, name string) (kv.Vault, error) {
	v, err := kv.GetVaultTx(tx, name)
	if errors.Is(err, kv.ErrVaultNotFound) || err == nil && (!v.IsDeleted() || !live(v, p.svc.Now()) || !strings.EqualFold(v.Location, arm.NormalizeLocation(location))) {
		return v, errDeletedNotFound(name)
	}
	return v, err
}

func (p *Provider) listDeleted(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if len(r.ID.Segments) != 2 {
		return httpx.Response{}, arm.Errorf(http.StatusNotFound, "InvalidResourceType", "Deleted vaults are listed per subscription.")
	}
	var vaults []kv.Vault
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		vaults, err = kv.VaultsTx(tx)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	out := list[deletedJSON]{Value: []deletedJSON{}}
	now := p.svc.Now()
	for _, v := range vaults {
		if v.IsDeleted() && live(v, now) {
			out.Value = append(out.Value, p.deletedView(v))
		}
	}
	return httpx.Response{Body: out}, nil
}

// deletedIDParts takes location and name from
// /subscriptions/{s}/providers/Microsoft.KeyVault/locations/{l}/deletedVaults/{n}[/purge].
func deletedIDParts(r *arm.Request, depth int) (string, string, error) {
	segs := r.ID.Segments
	if len(segs) != depth {
		return "", "", arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", r.ID.ResourceType())
	}
	return segs[1].Name, segs[2].Name, nil
}

func (p *Provider) getDeleted(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	loc, name, err := deletedIDParts(r, 3)
	if err != nil {
		return httpx.Response{}, err
	}
	var v kv.Vault
	err = p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		v, err = p.deletedVaultTx(tx, loc, name)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.deletedView(v)}, nil
}

// opPurge is the long-running operation of a purge, as Azure runs it: the POST answers 202 and
// the deleted vault (and its secrets) goes once the operation runs.
const opPurge = "keyvault.purge"

// purgeDeleted starts the purge of a deleted vault: a refusal (not found, purge protection) is
// answered at once, the purge itself is an operation the SDK's poller follows to Succeeded.
func (p *Provider) purgeDeleted(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	loc, name, err := deletedIDParts(r, 4)
	if err != nil {
		return httpx.Response{}, err
	}
	var op arm.Operation
	err = p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		v, err := p.deletedVaultTx(tx, loc, name)
		if err != nil {
			return err
		}
		if v.PurgeProtection {
			return arm.Errorf(http.StatusConflict, "Conflict",
				"Operation 'purge' is not allowed for vault '%s' because purge protection is enabled; it will be purged at its scheduled purge date.", v.Name)
		}
		op, err = p.svc.NewOperationTx(tx, r, opPurge, p.deletedView(v).ID)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	p.svc.Launch(op)
	return p.svc.Accepted(http.StatusAccepted, op, nil), nil
}

// runPurge removes a deleted vault and its secrets; a vault no longer deleted (recovered
// meanwhile) or already purged is left alone, so a resumed operation is harmless.
func (p *Provider) runPurge(ctx context.Context, id armid.ID) error {
	if len(id.Segments) != 3 {
		return fmt.Errorf("purge: unexpected target %s", id)
	}
	loc, name := id.Segments[1].Name, id.Segments[2].Name
	purged := false
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		v, err := p.deletedVaultTx(tx, loc, name)
		var e *arm.Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			return nil
		} else if err != nil {
			return err
		}
		purged = true
		return kv.PurgeVaultTx(tx, v.Name)
	})
	if err == nil && purged {
		p.kv.Stop(name)
	}
	return err
}

// recoverVault is PUT with createMode "recover": the deleted vault comes back at its own id with
// every property, secret and its vaultUri.
func (p *Provider) recoverVault(ctx context.Context, r *arm.Request, b vaultBody) (httpx.Response, error) {
	name := r.ID.Name()
	var out arm.Resource
	var port int
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		if err := arm.CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		v, err := p.deletedVaultTx(tx, b.Location, name)
		if err != nil {
			return err
		}
		if !strings.EqualFold(v.ResourceID, r.ID.String()) {
			return arm.ErrBadRequest("The deleted vault '%s' can only be recovered to its original id '%s'.", name, v.ResourceID)
		}
		var snap arm.Resource
		if err := json.Unmarshal(v.Snapshot, &snap); err != nil {
			return err
		}
		props := decodeProps(snap)
		props.ProvisioningState = stateSucceeded
		port = v.Port
		out, err = p.putTx(tx, snap, props, v.Port)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	if err := p.kv.Resume(ctx, name, port); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: viewFor(ctx)(out)}, nil
}

type nameCheckBody struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type nameCheckJSON struct {
	NameAvailable bool   `json:"nameAvailable"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
}

func (p *Provider) checkName(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var b nameCheckBody
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if !strings.EqualFold(b.Type, VaultType) {
		return httpx.Response{}, arm.ErrBadRequest("The 'type' must be '%s'.", VaultType)
	}
	if !validName(b.Name) {
		return httpx.Response{Body: nameCheckJSON{Reason: "AccountNameInvalid", Message: errVaultName(b.Name).Message}}, nil
	}
	taken := false
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		v, err := kv.GetVaultTx(tx, b.Name)
		if errors.Is(err, kv.ErrVaultNotFound) {
			return nil
		}
		taken = err == nil && live(v, p.svc.Now())
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	if taken {
		return httpx.Response{Body: nameCheckJSON{Reason: "AlreadyExists", Message: "The vault name '" + b.Name + "' is already in use."}}, nil
	}
	return httpx.Response{Body: nameCheckJSON{NameAvailable: true}}, nil
}
