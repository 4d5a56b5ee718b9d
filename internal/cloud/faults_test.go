package cloud_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// Throttling and fault injection, driven through the real SDK clients with their default retry
// policy. Time is the cloud's injected clock: a per-retry policy moves it forward when the SDK
// is told to wait, as if the SDK's (short, configured) wait had been the real one. No test
// asserts on elapsed time.

// faultEnv is a cloud with a settable clock and the SDK's default retries.
type faultEnv struct {
	c     *cloud.Cloud
	s     cloud.Settings
	clock *clock
	cred  azcore.TokenCredential
}

func startFaulty(t *testing.T, opts cloud.Options) *faultEnv {
	t.Helper()
	clk := newClock()
	opts.Addr, opts.DataDir, opts.Clock = "127.0.0.1:0", t.TempDir(), clk.Now
	if opts.ARM.RetryAfter == 0 {
		opts.ARM.RetryAfter = 10 * time.Millisecond
	}
	c, err := cloud.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start cloud: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e := &faultEnv{c: c, s: c.Settings(), clock: clk}
	e.cred = secretCred(t, c, e.s.TenantID, e.s.ClientID, e.s.ClientSecret)
	return e
}

// waitOnClock moves the cloud's clock by the wait a 429 or 503 asked for, in seconds (the
// Retry-After header), so buckets refill as they would have during a real wait.
type waitOnClock struct{ clock *clock }

func (p waitOnClock) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		p.clock.Advance(time.Second)
	}
	return resp, err
}

// clientOptions keep the SDK's retry policy (3 retries, honouring retry-after-ms), with a short
// backoff for answers that name no wait (a 500), so tests stay fast.
func (e *faultEnv) clientOptions() azcore.ClientOptions {
	o := e.c.ClientOptions()
	o.Retry = policy.RetryOptions{RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond}
	o.PerRetryPolicies = []policy.Policy{waitOnClock{e.clock}}
	return o
}

func (e *faultEnv) armOptions() *arm.ClientOptions {
	return &arm.ClientOptions{ClientOptions: e.clientOptions()}
}

func (e *faultEnv) groups(t *testing.T) *armresources.ResourceGroupsClient {
	t.Helper()
	c, err := armresources.NewResourceGroupsClient(e.s.SubscriptionID, e.cred, e.armOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *faultEnv) createGroup(t *testing.T, name string) {
	t.Helper()
	if _, err := e.groups(t).CreateOrUpdate(t.Context(), name, armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil); err != nil {
		t.Fatalf("create resource group %s: %v", name, err)
	}
}

func (e *faultEnv) count(f reqlog.Filter) int { return len(e.c.Requests(f)) }

// TestThrottlingRetriedToSuccess: with Azure's limits shrunk, the SDK meets 429s on reads and
// writes, honours their Retry-After and succeeds; the request log shows each 429 and its retry.
func TestThrottlingRetriedToSuccess(t *testing.T) {
	e := startFaulty(t, cloud.Options{ARM: cloudarm.Config{Limits: &cloudarm.Limits{
		Reads: 2, ReadsPerSecond: 1, Writes: 1, WritesPerSecond: 1, RetryAfter: 5 * time.Millisecond,
	}}})
	groups := e.groups(t)
	since := e.c.RequestLog().Last()
	e.createGroup(t, "rg1")
	e.createGroup(t, "rg2") // the write bucket is empty: 429, then a retry after a second
	for range 3 {
		if _, err := groups.Get(t.Context(), "rg1", nil); err != nil {
			t.Fatalf("get: %v", err)
		}
	}
	throttled := e.c.Requests(reqlog.Filter{Service: "arm", Status: http.StatusTooManyRequests, Since: since})
	if len(throttled) != 2 || throttled[0].Method != http.MethodPut || throttled[1].Method != http.MethodGet {
		t.Fatalf("429s = %+v, want one PUT and one GET", throttled)
	}
	for _, r := range throttled {
		if r.Principal != e.s.ObjectID {
			t.Errorf("429 logged for principal %q, want %s", r.Principal, e.s.ObjectID)
		}
	}
	if n := e.count(reqlog.Filter{Service: "arm", Method: http.MethodPut, PathPrefix: "/subscriptions/" + e.s.SubscriptionID + "/resourcegroups/rg2", Since: since}); n != 2 {
		t.Errorf("PUTs of rg2 = %d, want 2 (429 + retry)", n)
	}

	// The 429 itself, as a client sees it.
	tok, err := getToken(t, e.cred, armScope)
	if err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	for range 3 { // the read bucket holds 2
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.s.URL+"/subscriptions/"+e.s.SubscriptionID+"/resourcegroups/rg1?api-version=2021-04-01", nil)
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		if resp, err = (&http.Client{Transport: e.c.Transport()}).Do(req); err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	h := resp.Header
	if resp.StatusCode != http.StatusTooManyRequests || h.Get("Retry-After") != "1" || h.Get("X-Ms-Retry-After-Ms") != "5" ||
		h.Get("x-ms-ratelimit-remaining-subscription-reads") != "0" || h.Get("X-Ms-Error-Code") != "SubscriptionRequestsThrottled" {
		t.Errorf("throttled answer: %d %v", resp.StatusCode, h)
	}
}

// TestThrottlingOffByDefault: without limits nothing is counted down or refused.
func TestThrottlingOffByDefault(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	since := e.c.RequestLog().Last()
	for i := range 5 {
		e.createGroup(t, "rg"+string(rune('a'+i)))
	}
	if n := e.count(reqlog.Filter{Status: http.StatusTooManyRequests, Since: since}); n != 0 {
		t.Errorf("%d requests throttled with throttling off", n)
	}
}

// kvEnv creates a vault whose access policy lets the bootstrap principal manage secrets, and an
// azsecrets client for it.
func (e *faultEnv) vaultClient(t *testing.T, name string) (*azsecrets.Client, string) {
	t.Helper()
	e.createGroup(t, "rg-kv")
	vaults, err := armkeyvault.NewVaultsClient(e.s.SubscriptionID, e.cred, e.armOptions())
	if err != nil {
		t.Fatal(err)
	}
	all := []*armkeyvault.SecretPermissions{to.Ptr(armkeyvault.SecretPermissionsAll)}
	poller, err := vaults.BeginCreateOrUpdate(t.Context(), "rg-kv", name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"),
		Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(e.s.TenantID),
			SKU:      &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			AccessPolicies: []*armkeyvault.AccessPolicyEntry{{
				TenantID: to.Ptr(e.s.TenantID), ObjectID: to.Ptr(e.s.ObjectID),
				Permissions: &armkeyvault.Permissions{Secrets: all},
			}},
		},
	}, nil)
	if err != nil {
		t.Fatalf("create vault: %v", err)
	}
	v, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("create vault: poll: %v", err)
	}
	c, err := azsecrets.NewClient(*v.Properties.VaultURI, e.cred, &azsecrets.ClientOptions{
		ClientOptions: e.clientOptions(), DisableChallengeResourceVerification: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, *v.Properties.VaultURI
}

// TestKeyVaultThrottlingRetriedToSuccess: a vault's budget runs out, azsecrets gets Key Vault's
// 429 "Throttled" and retries to success.
func TestKeyVaultThrottlingRetriedToSuccess(t *testing.T) {
	e := startFaulty(t, cloud.Options{KeyVaultLimits: &keyvault.Limits{Requests: 2, PerSecond: 1, RetryAfter: 5 * time.Millisecond}})
	secrets, _ := e.vaultClient(t, "kv-throttle")
	since := e.c.RequestLog().Last()
	if _, err := secrets.SetSecret(t.Context(), "a", azsecrets.SetSecretParameters{Value: to.Ptr("1")}, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := secrets.GetSecret(t.Context(), "a", "", nil)
		if err != nil || *got.Value != "1" {
			t.Fatalf("get: %v", err)
		}
	}
	throttled := e.c.Requests(reqlog.Filter{Service: "keyvault", Vault: "kv-throttle", Status: http.StatusTooManyRequests, Since: since})
	if len(throttled) != 1 || throttled[0].Method != http.MethodGet || throttled[0].Principal != e.s.ObjectID {
		t.Errorf("429s = %+v, want one GET by the bootstrap principal", throttled)
	}
}

// TestFaultNextRequestsFail: the next two PUTs of identities fail with 503; armmsi retries
// through them; the request log shows the rule on the failed ones.
func TestFaultNextRequestsFail(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	e.createGroup(t, "rg")
	if err := e.c.Faults().Set(faults.Config{Rules: []faults.Rule{{
		Name: "two-503s", Method: http.MethodPut, ResourceType: "Microsoft.ManagedIdentity/userAssignedIdentities",
		Status: http.StatusServiceUnavailable, Count: 2, RetryAfter: faults.Duration(5 * time.Millisecond),
	}}}); err != nil {
		t.Fatal(err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(e.s.SubscriptionID, e.cred, e.armOptions())
	if err != nil {
		t.Fatal(err)
	}
	since := e.c.RequestLog().Last()
	res, err := ids.CreateOrUpdate(t.Context(), "rg", "app", armmsi.Identity{Location: to.Ptr("eastus")}, nil)
	if err != nil {
		t.Fatalf("create identity through two 503s: %v", err)
	}
	if res.Properties == nil || res.Properties.PrincipalID == nil {
		t.Errorf("identity without principal: %+v", res)
	}
	puts := e.c.Requests(reqlog.Filter{Method: http.MethodPut, PathPrefix: *res.ID, Since: since})
	if len(puts) != 3 || puts[0].Status != 503 || puts[0].Fault != "two-503s" || puts[1].Status != 503 || puts[2].Status/100 != 2 || puts[2].Fault != "" {
		t.Errorf("PUTs = %+v, want 503, 503, success", puts)
	}
	// Spent: the rule no longer fires.
	if _, left := e.c.Faults().Config(); left[0] != 0 {
		t.Errorf("left = %v", left)
	}
	// Without retries the fault is what the client sees, in ARM's error shape.
	if err := e.c.Faults().Set(faults.Config{Rules: []faults.Rule{{ResourceType: "arm", Method: http.MethodGet, Status: http.StatusConflict, Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = ids.Get(t.Context(), "rg", "app", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusConflict || re.ErrorCode != "Conflict" {
		t.Errorf("injected 409: %v", err)
	}
}

// TestFaultLRO: a resource-group delete made to take three polls, and one made to fail; the
// SDK's poller sees both.
func TestFaultLRO(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	groups := e.groups(t)
	e.createGroup(t, "slow")
	e.createGroup(t, "stuck")
	err := e.c.Faults().Set(faults.Config{Rules: []faults.Rule{
		{Name: "fail-stuck", Method: http.MethodDelete, ResourceType: "Microsoft.Resources/resourceGroups", Count: 1,
			LRO: &faults.LRO{Polls: 1, Result: faults.ResultFailed, Code: "ResourceGroupDeletionBlocked", Message: "blocked on purpose"}},
		{Name: "three-polls", Method: http.MethodDelete, ResourceType: "Microsoft.Resources/resourceGroups", LRO: &faults.LRO{Polls: 3}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	poll := &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}

	p, err := groups.BeginDelete(t.Context(), "stuck", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.PollUntilDone(t.Context(), poll)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != "ResourceGroupDeletionBlocked" {
		t.Fatalf("failed delete: %v", err)
	}
	if _, err := groups.Get(t.Context(), "stuck", nil); err != nil {
		t.Errorf("a failed delete removed the group: %v", err)
	}

	since := e.c.RequestLog().Last()
	p, err = groups.BeginDelete(t.Context(), "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(t.Context(), poll); err != nil {
		t.Fatalf("slow delete: %v", err)
	}
	statusPath := "/subscriptions/" + e.s.SubscriptionID + "/providers/Microsoft.Resources/operationStatuses/"
	if n := e.count(reqlog.Filter{Method: http.MethodGet, PathPrefix: statusPath, Since: since}); n != 4 {
		t.Errorf("status polls = %d, want 4 (three InProgress, then Succeeded)", n)
	}
	if _, err := groups.Get(t.Context(), "slow", nil); !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		t.Errorf("group after its delete succeeded: %v", err)
	}
}

// TestFaultsFromFile: a YAML file (what `cerulean-local cloud --faults FILE` loads) configures the
// cloud from its start; a bad file or configuration is refused naming the problem.
func TestFaultsFromFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "faults.yaml")
	if err := os.WriteFile(good, []byte(`
rules:
  - name: flaky-groups
    method: GET
    resourceType: Microsoft.Resources/resourceGroups
    status: 500
    count: 1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := faults.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	e := startFaulty(t, cloud.Options{Faults: &cfg})
	e.createGroup(t, "rg")
	since := e.c.RequestLog().Last()
	if _, err := e.groups(t).Get(t.Context(), "rg", nil); err != nil {
		t.Fatalf("get through one 500: %v", err)
	}
	if got := e.c.Requests(reqlog.Filter{Method: http.MethodGet, Since: since, Service: "arm"}); len(got) != 2 || got[0].Status != 500 || got[0].Fault != "flaky-groups" || got[1].Status != 200 {
		t.Errorf("GETs = %+v", got)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules:\n  - status: 404\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := faults.Load(bad); !errors.Is(err, faults.ErrInvalid) || !strings.Contains(err.Error(), "bad.yaml") ||
		!strings.Contains(err.Error(), "rules[0]: status 404 is not one of 500, 503, 409, 429") {
		t.Errorf("bad file: %v", err)
	}
	invalid := faults.Config{Rules: []faults.Rule{{Method: http.MethodGet, LRO: &faults.LRO{Polls: 1}}}}
	_, err = cloud.Start(t.Context(), cloud.Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Faults: &invalid})
	if !errors.Is(err, faults.ErrInvalid) {
		t.Errorf("Start with an invalid configuration: %v", err)
	}
}

// adminCall sends an admin API request with the bootstrap principal's ARM token.
func (e *faultEnv) adminCall(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	tok, err := getToken(t, e.cred, armScope)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.s.URL+"/_cerulean/admin"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestFaultsAdminAPI: rules set over the admin API (YAML here) take effect, a bad configuration
// is refused with the reason and changes nothing, and the request log is readable there too,
// without tokens or secrets.
func TestFaultsAdminAPI(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	st, b := e.adminCall(t, http.MethodPut, "/faults", "rules:\n  - name: token-503\n    resourceType: entra\n    method: POST\n    status: 503\n    count: 1\n    retryAfter: 5ms\n")
	if st != http.StatusOK || !strings.Contains(string(b), `"token-503"`) {
		t.Fatalf("put faults: %d %s", st, b)
	}
	st, b = e.adminCall(t, http.MethodPut, "/faults", `{"rules":[{"status":418}]}`)
	if st != http.StatusBadRequest || !strings.Contains(string(b), "InvalidFaultConfiguration") || !strings.Contains(string(b), "status 418 is not one of 500, 503, 409, 429") {
		t.Errorf("bad faults: %d %s", st, b)
	}
	if c, _ := e.c.Faults().Config(); len(c.Rules) != 1 || c.Rules[0].Name != "token-503" {
		t.Errorf("a refused configuration changed the rules: %+v", c)
	}

	// A new credential's token request meets the 503 and azidentity retries it.
	since := e.c.RequestLog().Last()
	cred, err := azidentityCred(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getToken(t, cred, armScope); err != nil {
		t.Fatalf("token through a 503: %v", err)
	}
	st, b = e.adminCall(t, http.MethodGet, "/requests?service=entra&method=POST&since="+strconv.FormatUint(since, 10), "")
	var view struct {
		Value []reqlog.Entry `json:"value"`
	}
	if err := json.Unmarshal(b, &view); st != http.StatusOK || err != nil {
		t.Fatalf("requests: %d %s", st, b)
	}
	if len(view.Value) != 2 || view.Value[0].Status != 503 || view.Value[0].Fault != "token-503" || view.Value[1].Status != 200 {
		t.Errorf("token requests = %+v", view.Value)
	}
	_, all := e.adminCall(t, http.MethodGet, "/requests", "")
	for _, secret := range []string{e.s.ClientSecret, "eyJ", "Bearer"} {
		if strings.Contains(string(all), secret) {
			t.Errorf("the request log holds %q", secret)
		}
	}
	if st, _ := e.adminCall(t, http.MethodDelete, "/faults", ""); st != http.StatusNoContent {
		t.Errorf("delete faults: %d", st)
	}
	if c, _ := e.c.Faults().Config(); len(c.Rules) != 0 {
		t.Errorf("rules after delete: %+v", c.Rules)
	}
	if st, _ := e.adminCall(t, http.MethodDelete, "/requests", ""); st != http.StatusNoContent || e.c.RequestLog().Count(reqlog.Filter{}) != 0 {
		t.Errorf("clear requests: %d", st)
	}
}

func azidentityCred(e *faultEnv) (azcore.TokenCredential, error) {
	return azidentity.NewClientSecretCredential(e.s.TenantID, e.s.ClientID, e.s.ClientSecret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: e.clientOptions(), DisableInstanceDiscovery: true,
	})
}

// TestFaultLROOnPut: a PUT made long-running answers 201 with Azure-AsyncOperation; a Failed
// one reports InProgress for its polls, then Failed, and creates nothing.
func TestFaultLROOnPut(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	if err := e.c.Faults().Set(faults.Config{Rules: []faults.Rule{{Method: http.MethodPut, ResourceType: "Microsoft.Resources/resourceGroups",
		LRO: &faults.LRO{Polls: 2, Result: faults.ResultFailed}}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := getToken(t, e.cred, armScope)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, u, body string) (*http.Response, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	group := e.s.URL + "/subscriptions/" + e.s.SubscriptionID + "/resourcegroups/never?api-version=2021-04-01"
	resp, _ := do(http.MethodPut, group, `{"location":"eastus"}`)
	status := resp.Header.Get("Azure-AsyncOperation")
	if resp.StatusCode != http.StatusCreated || status == "" {
		t.Fatalf("PUT: %d %v", resp.StatusCode, resp.Header)
	}
	var seen []string
	for range 3 {
		_, out := do(http.MethodGet, status, "")
		s, _ := out["status"].(string)
		seen = append(seen, s)
	}
	if strings.Join(seen, ",") != "InProgress,InProgress,Failed" {
		t.Errorf("statuses = %v", seen)
	}
	if resp, _ := do(http.MethodGet, group, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a failed PUT created the group: %d", resp.StatusCode)
	}
}
