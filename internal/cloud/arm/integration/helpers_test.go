package integration_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

const (
	armScope         = "https://management.core.windows.net//.default"
	exchangeAudience = "api://AzureADTokenExchange"
)

type env struct {
	c    *cloud.Cloud
	s    cloud.Settings
	logs *cloudtest.SyncBuffer
	cred azcore.TokenCredential // the bootstrap principal, Owner of the subscription
}

// start runs a cloud in-process on a free port with a short LRO poll interval.
func start(t *testing.T, trust ...[]byte) *env {
	t.Helper()
	return startWith(t, cloudarm.Unlimited, trust...)
}

// startWithLimits is start with these throttling limits.
func startWithLimits(t *testing.T, limits cloudarm.Limits) *env {
	t.Helper()
	return startWith(t, limits)
}

func startWith(t *testing.T, limits cloudarm.Limits, trust ...[]byte) *env {
	t.Helper()
	logs := &cloudtest.SyncBuffer{}
	cfg := cloudtest.FastARM()
	cfg.Limits, cfg.MaxBody = &limits, 64<<10
	c := cloudtest.Start(t, cloud.Options{TrustCAs: trust, Logger: cloudtest.DebugLogger(logs), ARM: cfg})
	return &env{c: c, s: c.Settings(), logs: logs, cred: cloudtest.OwnerCred(t, c)}
}

type clients struct {
	groups      *armresources.ResourceGroupsClient
	identities  *armmsi.UserAssignedIdentitiesClient
	fics        *armmsi.FederatedIdentityCredentialsClient
	assignments *armauthorization.RoleAssignmentsClient
	definitions *armauthorization.RoleDefinitionsClient
}

func (e *env) clients(t *testing.T, cred azcore.TokenCredential) clients {
	t.Helper()
	var c clients
	var err error
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.groups, err = armresources.NewResourceGroupsClient(e.s.SubscriptionID, cred, cloudtest.ARMOptions(e.c))
	must(err)
	c.identities, err = armmsi.NewUserAssignedIdentitiesClient(e.s.SubscriptionID, cred, cloudtest.ARMOptions(e.c))
	must(err)
	c.fics, err = armmsi.NewFederatedIdentityCredentialsClient(e.s.SubscriptionID, cred, cloudtest.ARMOptions(e.c))
	must(err)
	c.assignments, err = armauthorization.NewRoleAssignmentsClient(e.s.SubscriptionID, cred, cloudtest.ARMOptions(e.c))
	must(err)
	c.definitions, err = armauthorization.NewRoleDefinitionsClient(cred, cloudtest.ARMOptions(e.c))
	must(err)
	return c
}

// do sends a raw ARM request with an optional bearer token and returns status, headers and the
// decoded error code (if any).
func (e *env) do(t *testing.T, method, path, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	u := path
	if !strings.HasPrefix(u, "https://") {
		u = e.s.URL + path
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, rd)
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
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d answer is not JSON: %q", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// errorCode is body.error.code.
func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// wantARMError checks a status and ARM's error shape: body code, header code, request id.
func wantARMError(t *testing.T, status int, h http.Header, body map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || errorCode(body) != wantCode || h.Get("x-ms-error-code") != wantCode {
		t.Errorf("got %d %v (x-ms-error-code %q), want %d %s", status, body, h.Get("x-ms-error-code"), wantStatus, wantCode)
	}
	if e, _ := body["error"].(map[string]any); e == nil || e["message"] == "" {
		t.Errorf("error without message: %v", body)
	}
	if h.Get("x-ms-request-id") == "" || h.Get("x-ms-correlation-request-id") == "" {
		t.Errorf("missing request-id headers: %v", h)
	}
}

func ptr[T any](v T) *T { return &v }

func (e *env) rgID(name string) string {
	return "/subscriptions/" + e.s.SubscriptionID + "/resourceGroups/" + name
}

func (e *env) roleDefID(role string) string {
	return "/subscriptions/" + e.s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role
}
