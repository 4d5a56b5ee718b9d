package main

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/controller/credentials"
)

func init() {
	register(section{title: "Manager: a fresh token per write", run: benchManagerCredentials})
}

// benchManagerCredentials measures what the promise "a fresh token for every provisioning
// operation" costs: one ARM call (a resource-group GET, so that only the credential differs)
// made with the source's cached credential, against the same call made with Fresh (a new
// credential that first requests a token from Entra ID). Sequential, one client, the global
// client-secret credential of the manager resolved by internal/controller/credentials (its
// secret reader is an in-memory client holding no secret: the global credential applies).
func benchManagerCredentials(ctx context.Context, env benchEnv) ([]row, error) {
	c, err := startCloud(ctx, env, "manager-credentials", cloud.Options{})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	cfg := azure.Config{AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
		ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile}
	r := credentials.NewResolver(fake.NewClientBuilder().Build(), credentials.Settings{Azure: cfg,
		Global: &credentials.Source{SubscriptionID: s.SubscriptionID, TenantID: s.TenantID, ClientID: s.ClientID, ClientSecret: s.ClientSecret}})
	cred, err := r.For(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "resource"}})
	if err != nil {
		return nil, err
	}
	opts, err := cfg.ARMOptions()
	if err != nil {
		return nil, err
	}
	if err := createBenchGroup(ctx, s, cred.Cached(), opts); err != nil {
		return nil, err
	}
	get := func(tc azcore.TokenCredential, opts *arm.ClientOptions) error {
		groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, tc, opts)
		if err != nil {
			return err
		}
		_, err = groups.Get(ctx, "rg-bench", nil)
		return err
	}
	cached := func(context.Context) error { return get(cred.Cached(), opts) }
	fresh := func(ctx context.Context) error {
		tc, err := cred.Fresh(ctx)
		if err != nil {
			return err
		}
		return get(tc, opts)
	}
	if err := cached(ctx); err != nil {
		return nil, fmt.Errorf("warm up: %w", err)
	}
	const n = 500
	base := benchutil.Load(ctx, 1, n, 30*time.Second, cached)
	withToken := benchutil.Load(ctx, 1, n, 30*time.Second, fresh)
	return []row{
		{benchmark: "ARM GET, cached credential", result: base.String(), vsBaseline: "baseline"},
		{benchmark: "ARM GET, fresh credential (token request + GET)", result: withToken.String(),
			vsBaseline: ratio(base.RPS(), withToken.RPS()) + " the time per call"},
	}, nil
}
