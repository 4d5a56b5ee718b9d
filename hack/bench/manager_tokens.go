package main

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
)

func init() {
	register(section{title: "Manager: a fresh token per write", run: benchManagerTokens})
}

// benchManagerTokens measures what the manager's promise of a fresh token for every
// provisioning operation costs: one identity PUT with a cached credential (the baseline) against
// the same PUT with a new credential, which first requests a token, as the manager sends every
// PUT and DELETE. Sequential, against the in-process local cloud.
func benchManagerTokens(ctx context.Context, env benchEnv) ([]row, error) {
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "manager-tokens", cloud.Options{ARM: cloudarm.Config{Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	opts := &arm.ClientOptions{ClientOptions: c.ClientOptions()}
	cached, err := ownerCred(c, opts.ClientOptions)
	if err != nil {
		return nil, err
	}
	if err := createBenchGroup(ctx, s, cached, opts); err != nil {
		return nil, err
	}
	put := func(cred azcore.TokenCredential) func(context.Context) error {
		return func(ctx context.Context) error {
			ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, opts)
			if err != nil {
				return err
			}
			_, err = ids.CreateOrUpdate(ctx, "rg-bench", "bench-identity", armmsi.Identity{Location: to.Ptr("eastus"), Tags: map[string]*string{"t": to.Ptr(time.Now().String())}}, nil)
			return err
		}
	}
	const total = 300
	base := benchutil.Load(ctx, 1, total, 30*time.Second, put(cached))
	fresh := benchutil.Load(ctx, 1, total, 30*time.Second, func(ctx context.Context) error {
		cred, err := ownerCred(c, opts.ClientOptions)
		if err != nil {
			return err
		}
		return put(cred)(ctx)
	})
	return []row{
		{benchmark: "baseline: identity PUT, cached token", result: base.String()},
		{benchmark: "identity PUT with a fresh token (the manager's writes)", result: fresh.String(),
			vsBaseline: fmt.Sprintf("%s of baseline p50", ratio(float64(fresh.P50), float64(base.P50)))},
	}, nil
}
