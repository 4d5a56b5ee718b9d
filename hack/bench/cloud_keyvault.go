package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/authz"
)

func init() {
	register(section{title: "Local cloud: Key Vault secrets", run: benchCloudKeyVault})
}

// benchCloudKeyVault measures the Key Vault data plane through azsecrets (its token cached, as
// an application's is): every request still has its token verified and its RBAC data action
// checked. GET reads one secret; SET writes a new version, each an fsynced transaction.
func benchCloudKeyVault(ctx context.Context, env benchEnv) ([]row, error) {
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "cloud-keyvault", cloud.Options{ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	opts := c.ClientOptions()
	hc, tr := loadClient(c)
	defer tr.CloseIdleConnections()
	opts.Transport = hc
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	cred, err := ownerCred(c, opts)
	if err != nil {
		return nil, err
	}
	uri, vaultID, err := benchVault(ctx, s, cred, opts)
	if err != nil {
		return nil, err
	}
	// The bootstrap principal is Owner, which grants no data access: give it Secrets Officer.
	now := time.Now().UTC()
	name := uuid.NewString()
	if err := c.ARM().Authz().Ensure(ctx, authz.Assignment{ID: authz.AssignmentID(vaultID, name), Name: name, Scope: vaultID,
		RoleDefinitionID: authz.KeyVaultSecretsOfficer, PrincipalID: s.ObjectID, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now}); err != nil {
		return nil, err
	}
	sc, err := azsecrets.NewClient(uri, cred, &azsecrets.ClientOptions{ClientOptions: opts, DisableChallengeResourceVerification: true})
	if err != nil {
		return nil, err
	}
	if _, err := sc.SetSecret(ctx, "bench", azsecrets.SetSecretParameters{Value: to.Ptr("a benchmark value of modest size")}, nil); err != nil {
		return nil, fmt.Errorf("warm up: %w", err)
	}
	get := func(ctx context.Context) error {
		_, err := sc.GetSecret(ctx, "bench", "", nil)
		return err
	}
	var n atomic.Int64
	set := func(ctx context.Context) error {
		name := fmt.Sprintf("bench-%d", n.Add(1)%64)
		_, err := sc.SetSecret(ctx, name, azsecrets.SetSecretParameters{Value: to.Ptr("a benchmark value of modest size")}, nil)
		return err
	}
	var rows []row
	var base benchutil.Result
	for _, conc := range []int{1, 8, 64} {
		total := min(300*conc, 3000)
		g := benchutil.Load(ctx, conc, total, 20*time.Second, get)
		w := benchutil.Load(ctx, conc, min(100*conc, 1000), 20*time.Second, set)
		if conc == 1 {
			base = g
		}
		rows = append(rows,
			row{benchmark: fmt.Sprintf("secret GET, %d concurrent", conc), result: g.String(), vsBaseline: ratio(g.RPS(), base.RPS()) + " of 1-client GET rps"},
			row{benchmark: fmt.Sprintf("secret SET, %d concurrent", conc), result: w.String(), vsBaseline: ratio(w.RPS(), g.RPS()) + " of GET rps"},
		)
	}
	return rows, nil
}

// benchVault creates a resource group and an RBAC vault through armkeyvault.
func benchVault(ctx context.Context, s cloud.Settings, cred *azidentity.ClientSecretCredential, opts policy.ClientOptions) (string, string, error) {
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	if err := createBenchGroup(ctx, s, cred, armOpts); err != nil {
		return "", "", fmt.Errorf("create resource group: %w", err)
	}
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return "", "", err
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, "rg-bench", "kv-bench", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(s.TenantID), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
		}}, nil)
	if err != nil {
		return "", "", fmt.Errorf("create vault: %w", err)
	}
	v, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	if err != nil {
		return "", "", fmt.Errorf("create vault: %w", err)
	}
	return *v.Properties.VaultURI, *v.ID, nil
}
