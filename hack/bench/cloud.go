package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/cloud"
)

// What the local cloud's sections share.

// startCloud starts an in-process cloud on a free port with its data in the scratch directory
// dir; the caller closes it.
func startCloud(ctx context.Context, env benchEnv, dir string, opts cloud.Options) (*cloud.Cloud, error) {
	opts.Addr, opts.DataDir = "127.0.0.1:0", filepath.Join(env.scratch, dir)
	return cloud.Start(ctx, opts)
}

// loadClient is an HTTP client of the cloud for concurrent load: its transport keeps up to 64
// idle connections per host. The caller closes the transport's idle connections when done.
func loadClient(c *cloud.Cloud) (*http.Client, *http.Transport) {
	tr := c.Transport()
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}, tr
}

// ownerCred is the credential of the cloud's bootstrap principal with these client options.
func ownerCred(c *cloud.Cloud, opts azcore.ClientOptions) (*azidentity.ClientSecretCredential, error) {
	s := c.Settings()
	return azidentity.NewClientSecretCredential(s.TenantID, s.ClientID, s.ClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
}

// createBenchGroup creates the resource group rg-bench in eastus.
func createBenchGroup(ctx context.Context, s cloud.Settings, cred azcore.TokenCredential, opts *arm.ClientOptions) error {
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		return err
	}
	_, err = groups.CreateOrUpdate(ctx, "rg-bench", armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil)
	return err
}

// send sends a raw request with these headers (and body, unless empty), reads the answer to
// the end and returns its status.
func send(ctx context.Context, hc *http.Client, method, u, body string, h map[string]string) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
