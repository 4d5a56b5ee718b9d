package keyvault_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/entra"
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

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	c     *cloud.Cloud
	s     cloud.Settings
	logs  *syncBuffer
	owner azcore.TokenCredential // the bootstrap principal, Owner of the subscription
	rg    string
}

// start runs a cloud in-process on a free port and creates a resource group.
func start(t *testing.T) *env { return startWithClock(t, nil) }

// clock is a settable clock; it starts at the real time so that what the SDK checks with its
// own clock stays valid until a test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func startWithClock(t *testing.T, now func() time.Time) *env {
	t.Helper()
	logs := &syncBuffer{}
	limits := cloudarm.Unlimited
	c, err := cloud.Start(t.Context(), cloud.Options{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), Clock: now,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ARM:    cloudarm.Config{RetryAfter: 20 * time.Millisecond, Limits: &limits},
	})
	if err != nil {
		t.Fatalf("start cloud: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e := &env{c: c, s: c.Settings(), logs: logs, rg: "rg-kv"}
	e.owner = e.secretCred(t, e.s.ClientID, e.s.ClientSecret)
	groups, err := armresources.NewResourceGroupsClient(e.s.SubscriptionID, e.owner, e.armOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.CreateOrUpdate(t.Context(), e.rg, armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil); err != nil {
		t.Fatalf("create resource group: %v", err)
	}
	return e
}

func (e *env) secretCred(t *testing.T, clientID, secret string) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(e.s.TenantID, clientID, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// armOptions are the SDK client options for the cloud (no retries, so a test sees every status).
func (e *env) armOptions() *arm.ClientOptions {
	o := e.c.ClientOptions()
	o.Retry = policy.RetryOptions{MaxRetries: -1}
	return &arm.ClientOptions{ClientOptions: o}
}

// newPrincipal creates a service principal with a secret and no role.
func (e *env) newPrincipal(t *testing.T, name string) (entra.Principal, azcore.TokenCredential) {
	t.Helper()
	dir := e.c.Entra().Directory
	p, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: e.s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := dir.AddSecret(t.Context(), e.s.TenantID, p.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return p, e.secretCred(t, p.ClientID, secret)
}

func (e *env) vaults(t *testing.T) *armkeyvault.VaultsClient {
	t.Helper()
	c, err := armkeyvault.NewVaultsClient(e.s.SubscriptionID, e.owner, e.armOptions())
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
	c, err := armauthorization.NewRoleAssignmentsClient(e.s.SubscriptionID, e.owner, e.armOptions())
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
	o := e.c.ClientOptions()
	o.Retry = policy.RetryOptions{MaxRetries: -1}
	c, err := azsecrets.NewClient(vaultURI, cred, &azsecrets.ClientOptions{ClientOptions: o, DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) token(t *testing.T, cred azcore.TokenCredential, scope string) string {
	t.Helper()
	tok, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	return tok.Token
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

// respErr asserts err is an azcore.ResponseError with this status and error code.
func respErr(t *testing.T, err error, status int, code string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want HTTP %d %s", err, status, code)
	}
	if re.StatusCode != status || (code != "" && re.ErrorCode != code) {
		t.Fatalf("got HTTP %d %s, want %d %s: %v", re.StatusCode, re.ErrorCode, status, code, err)
	}
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
