package cloud

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/authorization"
	"github.com/cerulean/cerulean/internal/cloud/arm/compute"
	"github.com/cerulean/cerulean/internal/cloud/arm/containerservice"
	"github.com/cerulean/cerulean/internal/cloud/arm/generic"
	"github.com/cerulean/cerulean/internal/cloud/arm/managedidentity"
	"github.com/cerulean/cerulean/internal/cloud/arm/resources"
	"github.com/cerulean/cerulean/internal/cloud/arm/storage"
	"github.com/cerulean/cerulean/internal/cloud/authz"
)

// ARM mounting (part 2). Kept apart from server.go so each part of the cloud owns its file.

// startARM builds the ARM front door with its providers, makes the bootstrap principal Owner of
// the subscription, and resumes interrupted long-running operations.
func (c *Cloud) startARM(ctx context.Context, opts Options, boot bootstrap) error {
	az := authz.New(c.store)
	scope := "/subscriptions/" + boot.SubscriptionID
	// A name derived from the grant, so every start ensures the same assignment.
	name := uuid.NewSHA1(uuid.NameSpaceURL, []byte(scope+"|"+boot.ObjectID+"|"+authz.Owner)).String()
	now := opts.Clock().UTC()
	if err := az.Ensure(ctx, authz.Assignment{
		ID: authz.AssignmentID(scope, name), Name: name, Scope: scope, RoleDefinitionID: authz.Owner,
		PrincipalID: boot.ObjectID, PrincipalType: "ServicePrincipal", Description: "Cerulean bootstrap principal",
		CreatedOn: now, UpdatedOn: now,
	}); err != nil {
		return fmt.Errorf("make bootstrap principal Owner: %w", err)
	}
	c.arm = arm.New(arm.Options{
		Store: c.store, Tokens: c.entra, Authz: az, BaseURL: c.settings.URL,
		TenantID: boot.TenantID, SubscriptionID: boot.SubscriptionID, Config: opts.ARM,
		Clock: opts.Clock, Logger: opts.Logger.With("service", "arm"),
	})
	resources.Register(c.arm, "Cerulean local subscription")
	managedidentity.Register(c.arm, c.entra.Directory)
	authorization.Register(c.arm, c.entra.Directory)
	compute.Register(c.arm, c.entra.Directory)
	storageProvider := storage.Register(c.arm, c.settings.URL)
	containerservice.Register(c.arm)
	generic.Register(c.arm)
	if err := c.registerEngines(opts); err != nil {
		return err
	}
	if err := c.startKeyVault(ctx, opts); err != nil {
		return err
	}
	if err := c.startStorage(ctx, opts, storageProvider); err != nil {
		return err
	}
	if err := c.arm.Start(ctx); err != nil {
		return err
	}
	return c.startEngines(ctx)
}

// withARM sends ARM's paths (/subscriptions/..., /providers/...) to ARM and the rest to next.
func (c *Cloud) withARM(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arm.Handles(r.URL.Path) {
			c.arm.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ARM is the ARM front door, for in-process callers (tests walk its route table).
func (c *Cloud) ARM() *arm.Service { return c.arm }

// closeARM stops ARM's background operations before the store closes.
func (c *Cloud) closeARM() {
	if c.arm != nil {
		c.arm.Close()
	}
}

// withHTTP2 offers HTTP/2 as well. The Azure SDK sends some $filter values unencoded (spaces
// and quotes in the query, as armauthorization's role-assignment lists do); Azure's front door
// accepts them because the SDK speaks HTTP/2 to it, while Go's HTTP/1.1 server rejects a
// request line with spaces.
func withHTTP2(c *tls.Config) *tls.Config {
	c.NextProtos = []string{"h2", "http/1.1"}
	return c
}
