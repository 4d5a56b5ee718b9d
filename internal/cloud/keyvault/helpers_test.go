package keyvault_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// Built-in role definition ids.
const (
	roleOwner          = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
	roleContributor    = "b24988ac-6180-42a0-ab88-20f7382dd24c"
	roleSecretsUser    = "4633458b-17de-408a-b874-0445c86b69e6"
	roleSecretsOfficer = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
	roleKVAdmin        = "00482a5a-887f-4fb3-b363-3b7fe8e74483"
	vaultScope         = "https://vault.azure.net/.default"
)

type env struct {
	c     *cloud.Cloud
	s     cloud.Settings
	logs  *cloudtest.SyncBuffer
	owner azcore.TokenCredential // the bootstrap principal, Owner of the subscription
	rg    string
}

// start runs a cloud in-process on a free port and creates a resource group.
func start(t *testing.T) *env { return startWithClock(t, nil) }

func startWithClock(t *testing.T, now func() time.Time) *env {
	t.Helper()
	logs := &cloudtest.SyncBuffer{}
	c := cloudtest.Start(t, cloud.Options{Clock: now, Logger: cloudtest.DebugLogger(logs), ARM: cloudtest.FastARM()})
	e := &env{c: c, s: c.Settings(), logs: logs, rg: "rg-kv"}
	e.owner = cloudtest.OwnerCred(t, c)
	cloudtest.CreateGroup(t, c, e.owner, cloudtest.ARMOptions(c), "eastus", e.rg)
	return e
}

func (e *env) vaults(t *testing.T) *armkeyvault.VaultsClient {
	t.Helper()
	c, err := armkeyvault.NewVaultsClient(e.s.SubscriptionID, e.owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) vaultID(name string) string {
	return "/subscriptions/" + e.s.SubscriptionID + "/resourceGroups/" + e.rg + "/providers/Microsoft.KeyVault/vaults/" + name
}

// createVault creates a vault through the SDK's long-running operation and returns its URI.
func (e *env) createVault(t *testing.T, name string, props armkeyvault.VaultProperties) armkeyvault.Vault {
	t.Helper()
	props.TenantID = to.Ptr(e.s.TenantID)
	props.SKU = &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)}
	poller, err := e.vaults(t).BeginCreateOrUpdate(t.Context(), e.rg, name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &props,
	}, nil)
	if err != nil {
		t.Fatalf("create vault %s: %v", name, err)
	}
	res, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("create vault %s: poll: %v", name, err)
	}
	if got := *res.Properties.ProvisioningState; got != armkeyvault.VaultProvisioningStateSucceeded {
		t.Fatalf("vault %s provisioningState = %s", name, got)
	}
	return res.Vault
}

func (e *env) rbacVault(t *testing.T, name string) string {
	t.Helper()
	return *e.createVault(t, name, armkeyvault.VaultProperties{EnableRbacAuthorization: to.Ptr(true)}).Properties.VaultURI
}

// assign grants a built-in role at scope through armauthorization.
func (e *env) assign(t *testing.T, scope, role, principalID string) {
	t.Helper()
	c, err := armauthorization.NewRoleAssignmentsClient(e.s.SubscriptionID, e.owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + e.s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(principalID),
			PrincipalType:    to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil)
	if err != nil {
		t.Fatalf("assign role %s: %v", role, err)
	}
}

// secrets is an azsecrets client for a vault of the local cloud: its CA trusted through the
// cloud's client options, challenge resource verification off (the vault is on 127.0.0.1), and
// no retries so a test sees every status.
func (e *env) secrets(t *testing.T, vaultURI string, cred azcore.TokenCredential) *azsecrets.Client {
	t.Helper()
	c, err := azsecrets.NewClient(vaultURI, cred, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// raw sends a request with the cloud's transport and decodes a JSON answer.
func (e *env) raw(t *testing.T, method, url, token string, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp, out
}

// innerCode reads innererror.code from a failed response.
func innerCode(t *testing.T, err error) string {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		return ""
	}
	var body struct {
		Error struct {
			InnerError struct {
				Code string `json:"code"`
			} `json:"innererror"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(re.RawResponse.Body)
	_ = json.Unmarshal(b, &body)
	return body.Error.InnerError.Code
}
