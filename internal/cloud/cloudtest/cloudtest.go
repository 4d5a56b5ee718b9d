// Package cloudtest is test support for the local cloud: it starts an in-process cloud, builds
// SDK credentials and client options for it, creates resource groups and principals, and builds
// and runs the cerulean binary for kill -9 tests. Only tests import it; it fails the test on
// any error, so none of its functions return one.
package cloudtest

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
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
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// Start runs a cloud in-process with these options and closes it when the test ends. An empty
// Addr is 127.0.0.1:0 (a free port) and an empty DataDir is a fresh t.TempDir().
func Start(t testing.TB, opts cloud.Options) *cloud.Cloud {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	c, err := cloud.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start cloud: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// FastARM is the ARM configuration most tests use: a 20ms long-running-operation poll interval
// and no throttling.
func FastARM() cloudarm.Config {
	limits := cloudarm.Unlimited
	return cloudarm.Config{RetryAfter: 20 * time.Millisecond, Limits: &limits}
}

// DebugLogger is a JSON logger at debug level writing to w (a SyncBuffer, usually).
func DebugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// SecretCred is a client secret credential of the cloud's tenant: its CA trusted through the
// cloud's client options, instance discovery off.
func SecretCred(t testing.TB, c *cloud.Cloud, clientID, secret string) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(c.Settings().TenantID, clientID, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// OwnerCred is the credential of the bootstrap principal, Owner of the subscription.
func OwnerCred(t testing.TB, c *cloud.Cloud) azcore.TokenCredential {
	t.Helper()
	s := c.Settings()
	return SecretCred(t, c, s.ClientID, s.ClientSecret)
}

// NoRetry is the cloud's client options without retries, so that a test sees every status.
func NoRetry(c *cloud.Cloud) azcore.ClientOptions {
	o := c.ClientOptions()
	o.Retry = policy.RetryOptions{MaxRetries: -1}
	return o
}

// ARMOptions are the ARM SDK client options for the cloud, without retries.
func ARMOptions(c *cloud.Cloud) *arm.ClientOptions {
	return &arm.ClientOptions{ClientOptions: NoRetry(c)}
}

// CreateGroup creates (or updates) resource group name in location in the cloud's subscription
// and returns its id.
func CreateGroup(t testing.TB, c *cloud.Cloud, cred azcore.TokenCredential, opts *arm.ClientOptions, location, name string) string {
	t.Helper()
	groups, err := armresources.NewResourceGroupsClient(c.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := groups.CreateOrUpdate(t.Context(), name, armresources.ResourceGroup{Location: &location}, nil)
	if err != nil {
		t.Fatalf("create resource group %s: %v", name, err)
	}
	return *g.ID
}

// CreateRBACVault creates (or updates) Key Vault name, standard SKU in RBAC mode, in resource
// group rg of the cloud's subscription and tenant, waits for it, and returns it.
func CreateRBACVault(t testing.TB, c *cloud.Cloud, cred azcore.TokenCredential, opts *arm.ClientOptions, location, rg, name string) armkeyvault.Vault {
	t.Helper()
	s := c.Settings()
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vaults.BeginCreateOrUpdate(t.Context(), rg, name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr(location), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(s.TenantID), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
		},
	}, nil)
	if err != nil {
		t.Fatalf("create vault %s: %v", name, err)
	}
	res, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("create vault %s: %v", name, err)
	}
	return res.Vault
}

// NewPrincipal creates a service principal with a secret valid for an hour and no role, and
// returns it with its credential.
func NewPrincipal(t testing.TB, c *cloud.Cloud, name string) (entra.Principal, azcore.TokenCredential) {
	t.Helper()
	tenant := c.Settings().TenantID
	dir := c.Entra().Directory
	p, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: tenant, Kind: entra.KindServicePrincipal, DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := dir.AddSecret(t.Context(), tenant, p.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return p, SecretCred(t, c, p.ClientID, secret)
}

// Token gets a token for scope from cred.
func Token(t testing.TB, cred azcore.TokenCredential, scope string) string {
	t.Helper()
	tok, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	return tok.Token
}

// SyncBuffer collects log output from concurrent handlers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Clock is a settable clock for cloud.Options.Clock. It starts at the real time, so that what
// the SDK checks with its own clock stays valid until a test moves it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a Clock at the current time.
func NewClock() *Clock { return &Clock{t: time.Now()} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// BuildCerulean builds the product command, cerulean (manager, node-agent, ...), into a temporary
// directory, so that a test does not depend on the Makefile or on bin/ being current.
func BuildCerulean(t testing.TB) string {
	t.Helper()
	return build(t, "cerulean")
}

// BuildCeruleanLocal builds the local environment's command, cerulean-local (cloud, up), as
// BuildCerulean does; StartProcess runs it.
func BuildCeruleanLocal(t testing.TB) string {
	t.Helper()
	return build(t, "cerulean-local")
}

func build(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/cerulean/cerulean/cmd/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// RespErr fails the test unless err is an azcore.ResponseError with this status and error code
// (any code if code is empty).
func RespErr(t testing.TB, err error, status int, code string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want HTTP %d %s", err, status, code)
	}
	if re.StatusCode != status || (code != "" && re.ErrorCode != code) {
		t.Fatalf("got HTTP %d %s, want %d %s: %v", re.StatusCode, re.ErrorCode, status, code, err)
	}
}

// AssignRole gives principal (an object id) the built-in role (its GUID, authz's constants) at
// scope, through ARM as the bootstrap principal.
func AssignRole(t testing.TB, c *cloud.Cloud, scope, role, principal string) {
	t.Helper()
	s := c.Settings()
	ras, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, OwnerCred(t, c), ARMOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ras.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
		PrincipalID:      to.Ptr(principal), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
	}}, nil); err != nil {
		t.Fatalf("assign role %s at %s: %v", role, scope, err)
	}
}
