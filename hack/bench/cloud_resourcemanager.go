package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
)

// This file is not named cloud_arm.go: the _arm suffix is a GOARCH build constraint.

func init() {
	register(section{title: "Local cloud: ARM", run: benchCloudARM})
}

// Bounds of each load run: whichever comes first.
const (
	armGets     = 3000
	armPuts     = 600
	armDuration = 20 * time.Second
)

// benchCloudARM measures ARM through the whole front door (token check, routing, api-version,
// RBAC evaluation, handler, store) at 1, 8 and 64 concurrent clients, with raw HTTPS requests
// carrying one token. GET reads a managed identity; PUT creates a new one each time (a
// resource and an Entra principal in one fsynced transaction). The baseline of GET is a GET of
// the subscription (the front door without a store read of the resource); the baseline of PUT
// is GET at the same concurrency. Throttling is off so the server, not the limits, is measured.
func benchCloudARM(ctx context.Context, env benchEnv) ([]row, error) {
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "cloud-arm", cloud.Options{ARM: cloudarm.Config{Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	cred, err := ownerCred(c, c.ClientOptions())
	if err != nil {
		return nil, err
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err != nil {
		return nil, fmt.Errorf("get token: %w", err)
	}
	hc, tr := loadClient(c)
	defer tr.CloseIdleConnections()
	h := map[string]string{"Authorization": "Bearer " + tok.Token, "Content-Type": "application/json"}
	call := func(method, path, body string, want int) func(context.Context) error {
		return func(ctx context.Context) error {
			status, err := send(ctx, hc, method, s.URL+path, body, h)
			if err != nil {
				return err
			}
			if status != want {
				return fmt.Errorf("%s %s: status %d", method, path, status)
			}
			return nil
		}
	}
	sub := "/subscriptions/" + s.SubscriptionID
	rg := sub + "/resourceGroups/bench"
	mi := rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/"
	const loc = `{"location":"eastus"}`
	if err := call(http.MethodPut, rg+"?api-version=2025-04-01", loc, http.StatusCreated)(ctx); err != nil {
		return nil, err
	}
	if err := call(http.MethodPut, mi+"target?api-version=2024-11-30", loc, http.StatusCreated)(ctx); err != nil {
		return nil, err
	}
	var n atomic.Int64
	put := func(ctx context.Context) error {
		return call(http.MethodPut, fmt.Sprintf("%sid-%d?api-version=2024-11-30", mi, n.Add(1)), loc, http.StatusCreated)(ctx)
	}

	var rows []row
	for _, conc := range []int{1, 8, 64} {
		base := benchutil.Load(ctx, conc, armGets, armDuration, call(http.MethodGet, sub+"?api-version=2022-12-01", "", http.StatusOK))
		get := benchutil.Load(ctx, conc, armGets, armDuration, call(http.MethodGet, mi+"target?api-version=2024-11-30", "", http.StatusOK))
		pt := benchutil.Load(ctx, conc, armPuts, armDuration, put)
		rows = append(rows,
			row{fmt.Sprintf("GET subscription (baseline), %d clients", conc), base.String(), ""},
			row{fmt.Sprintf("GET identity, %d clients", conc), get.String(), ratio(get.RPS(), base.RPS())},
			row{fmt.Sprintf("PUT new identity, %d clients", conc), pt.String(), ratio(pt.RPS(), get.RPS())},
		)
	}
	return rows, nil
}
