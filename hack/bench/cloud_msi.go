package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/msi"
)

func init() {
	register(section{title: "Local cloud: managed-identity tokens", run: benchCloudMSI})
}

// benchCloudMSI measures managed-identity tokens for code on a VM, at 1, 8 and 64 concurrent
// clients: the IMDS-style endpoint for the VM's system-assigned identity and the App
// Service-style endpoint (IDENTITY_ENDPOINT) for a user-assigned one chosen by client_id. Each
// request is a raw GET (the SDK would cache the token). The baseline is a client-secret token
// from the Entra token endpoint at the same concurrency, measured in the same run: both verify
// a credential, read the store once and sign one JWT.
func benchCloudMSI(ctx context.Context, env benchEnv) ([]row, error) {
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "cloud-msi", cloud.Options{ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	hc, tr := loadClient(c)
	defer tr.CloseIdleConnections()

	vmID, clientID, err := benchVM(ctx, c)
	if err != nil {
		return nil, err
	}
	pairs, err := msi.ComputeEnv(s.DataDir, vmID)
	if err != nil {
		return nil, err
	}
	header := pairs[1][1]
	resource := url.QueryEscape("https://vault.azure.net")
	imds := s.URL + msi.IMDSPath + "?api-version=2018-02-01&resource=" + resource
	appService := pairs[0][1] + "?api-version=" + msi.AppServiceAPIVersion + "&resource=" + resource + "&client_id=" + clientID
	secretForm := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret},
		"scope": {"https://vault.azure.net/.default"}}.Encode()
	tokenURL := s.URL + "/" + s.TenantID + "/oauth2/v2.0/token"

	call := func(method, u, body string, h map[string]string) func(context.Context) error {
		return func(ctx context.Context) error {
			status, err := send(ctx, hc, method, u, body, h)
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("%s answered %d", u[:strings.Index(u, "?")+1], status)
			}
			return nil
		}
	}
	imdsCall := call(http.MethodGet, imds, "", map[string]string{"Metadata": "true", msi.HeaderName: header})
	appCall := call(http.MethodGet, appService, "", map[string]string{msi.HeaderName: header})
	secretCall := call(http.MethodPost, tokenURL, secretForm, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	for _, f := range []func(context.Context) error{imdsCall, appCall, secretCall} {
		if err := f(ctx); err != nil {
			return nil, fmt.Errorf("warm up: %w", err)
		}
	}
	var rows []row
	for _, conc := range []int{1, 8, 64} {
		total := min(300*conc, 3000)
		base := benchutil.Load(ctx, conc, total, 20*time.Second, secretCall)
		im := benchutil.Load(ctx, conc, total, 20*time.Second, imdsCall)
		as := benchutil.Load(ctx, conc, total, 20*time.Second, appCall)
		rows = append(rows,
			row{benchmark: fmt.Sprintf("baseline: client-secret token, %d concurrent", conc), result: base.String()},
			row{benchmark: fmt.Sprintf("IMDS, system-assigned, %d concurrent", conc), result: im.String(), vsBaseline: ratio(im.RPS(), base.RPS()) + " of secret rps"},
			row{benchmark: fmt.Sprintf("IDENTITY_ENDPOINT, user-assigned by client_id, %d concurrent", conc), result: as.String(), vsBaseline: ratio(as.RPS(), base.RPS()) + " of secret rps"},
		)
	}
	return rows, nil
}

// benchVM creates, through the SDK, a VM with a system-assigned identity and one user-assigned
// identity; it returns the VM's id and the user-assigned identity's client id.
func benchVM(ctx context.Context, c *cloud.Cloud) (string, string, error) {
	s := c.Settings()
	opts := c.ClientOptions()
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	cred, err := ownerCred(c, opts)
	if err != nil {
		return "", "", err
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	if err := createBenchGroup(ctx, s, cred, armOpts); err != nil {
		return "", "", fmt.Errorf("create resource group: %w", err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return "", "", err
	}
	mi, err := ids.CreateOrUpdate(ctx, "rg-bench", "id-bench", armmsi.Identity{Location: to.Ptr("eastus")}, nil)
	if err != nil {
		return "", "", fmt.Errorf("create identity: %w", err)
	}
	vms, err := armcompute.NewVirtualMachinesClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return "", "", err
	}
	p, err := vms.BeginCreateOrUpdate(ctx, "rg-bench", "vm-bench", armcompute.VirtualMachine{
		Location: to.Ptr("eastus"),
		Identity: &armcompute.VirtualMachineIdentity{
			Type:                   to.Ptr(armcompute.ResourceIdentityTypeSystemAssignedUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*mi.ID: {}},
		},
	}, nil)
	if err != nil {
		return "", "", fmt.Errorf("create VM: %w", err)
	}
	vm, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	if err != nil {
		return "", "", fmt.Errorf("create VM: %w", err)
	}
	return *vm.ID, *mi.Properties.ClientID, nil
}
