package armresource

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A Vault's createMode takes, besides ARM's default and recover, Azure Service Operator's own
// createOrRecover and purgeThenCreate, which its vault extension turns into one of ARM's before
// each PUT from the soft-deleted vaults Azure holds. Cerulean does the same in BeforePut: the
// applied hash is the spec's (createOrRecover), so the lookup runs only when a PUT is due
// (creation, a spec change, or a vault gone from Azure), never in the steady state.
const (
	createModeDefault         = "default"
	createModeRecover         = "recover"
	createModeCreateOrRecover = "createOrRecover"
	createModePurgeThenCreate = "purgeThenCreate"
)

// purgeWait bounds how long one pass waits for a purge (Azure Service Operator waits for it in
// its reconcile too); a purge still running after it is looked at again by the next pass.
const purgeWait = 2 * time.Minute

// putEnv is what CheckPut and BeforePut may use: the pass and an ARM client (holding a cached
// token for CheckPut, a fresh one for BeforePut).
type putEnv struct {
	p      *pass
	client armAPI
}

// vaultCreateMode turns createOrRecover into recover when a soft-deleted vault of the name is
// in the vault's location (and was in the same resource group), else default; and
// purgeThenCreate into default, after purging such a vault.
func vaultCreateMode(ctx context.Context, env *putEnv, body map[string]any) error {
	props, _ := body["properties"].(map[string]any)
	mode, _ := props["createMode"].(string)
	if mode != createModeCreateOrRecover && mode != createModePurgeThenCreate {
		return nil
	}
	id, err := arm.ParseResourceID(env.p.id)
	if err != nil {
		return fmt.Errorf("%w: parse %s: %w", errInvalidSpec, env.p.id, err)
	}
	location, _ := body["location"].(string)
	if location == "" {
		return fmt.Errorf("%w: a Vault with createMode %s needs a location", errInvalidSpec, mode)
	}
	apiVersion := env.p.r.opts.Kind.APIVersion
	deletedPath := "/subscriptions/" + id.SubscriptionID + "/providers/Microsoft.KeyVault/locations/" +
		url.PathEscape(location) + "/deletedVaults/" + url.PathEscape(id.Name)
	deleted, err := env.client.get(ctx, deletedPath, apiVersion)
	found := err == nil
	logger := log.FromContext(ctx)
	switch {
	case err == nil || isNotFound(err):
	case mode == createModePurgeThenCreate:
		// As Azure Service Operator: a lookup that fails is taken as no deleted vault (the
		// PUT then says whether one is in the way).
		logger.Info("Could not look up a soft-deleted vault; creating", "vault", id.Name, "err", err.Error())
	default:
		return fmt.Errorf("look up a soft-deleted vault %s in %s: %w", id.Name, location, err)
	}
	dprops, _ := deleted["properties"].(map[string]any)
	original, _ := dprops["vaultId"].(string)
	logger.Info("Vault createMode resolved against soft-deleted vaults", "vault", id.Name, "createMode", mode, "softDeletedVaultExists", found, "originalID", original)
	switch {
	case !found:
		props["createMode"] = createModeDefault
	case mode == createModeCreateOrRecover:
		if err := sameGroup(original, id); err != nil {
			return err
		}
		env.p.r.recorder.Eventf(env.p.obj, nil, corev1.EventTypeNormal, "RecoveringSoftDeletedVault", "Reconcile",
			"createMode createOrRecover: recovering the soft-deleted vault %s", id.Name)
		props["createMode"] = createModeRecover
	default:
		// Purging destroys the deleted vault's secrets: the vault it was must be one the
		// namespace may act on, as the vault itself must be.
		target := original
		if target == "" {
			target = deletedPath
		}
		if err := env.p.r.checkGrants(ctx, env.p.obj, env.p.cred, target); err != nil {
			return err
		}
		env.p.r.recorder.Eventf(env.p.obj, nil, corev1.EventTypeNormal, "PurgingSoftDeletedVault", "Reconcile",
			"createMode purgeThenCreate: purging the soft-deleted vault %s before creating it", id.Name)
		if err := env.purge(ctx, deletedPath+"/purge", id.Name); err != nil {
			return err
		}
		props["createMode"] = createModeDefault
	}
	return nil
}

// sameGroup refuses to recover a vault into another resource group than the one it was deleted
// from (Azure recovers it only at its original id), as Azure Service Operator does.
func sameGroup(original string, id *arm.ResourceID) error {
	if original == "" {
		return nil
	}
	old, err := arm.ParseResourceID(original)
	if err != nil {
		return fmt.Errorf("parse the soft-deleted vault's id %s: %w", original, err)
	}
	if !strings.EqualFold(old.SubscriptionID, id.SubscriptionID) || !strings.EqualFold(old.ResourceGroupName, id.ResourceGroupName) {
		return fmt.Errorf("%w: cannot recover vault %s: it was deleted from resource group %s, the spec names resource group %s",
			errInvalidSpec, id.Name, old.ResourceGroupName, id.ResourceGroupName)
	}
	return nil
}

// purge runs the purge operation to its end, for up to purgeWait; after that the pass reports
// progress and the next one looks again.
func (e *putEnv) purge(ctx context.Context, path, name string) error {
	poller, err := e.client.beginPost(ctx, path, e.p.r.opts.Kind.APIVersion)
	if err != nil {
		return fmt.Errorf("purge the soft-deleted vault %s: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, purgeWait)
	defer cancel()
	running := &progressError{msg: "Purging the soft-deleted vault " + name + " before creating it"}
	for {
		done, wait, err := stepPoller(wctx, poller)
		switch {
		case done && err != nil:
			return fmt.Errorf("purge the soft-deleted vault %s: %w", name, err)
		case done:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return running
		case err != nil:
			return err
		}
		select {
		case <-wctx.Done():
		case <-time.After(e.p.r.pollAfter(wait)):
		}
	}
}
