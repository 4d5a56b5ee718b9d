package msi_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/msi"
)

var poll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

// fixture is a cloud with a VM that has a system-assigned identity and user-assigned "id-a",
// and a user-assigned "id-b" that is assigned to nothing.
type fixture struct {
	c        *cloud.Cloud
	s        cloud.Settings
	logs     *cloudtest.SyncBuffer
	cred     azcore.TokenCredential
	opts     *arm.ClientOptions
	vm       armcompute.VirtualMachine
	vms      *armcompute.VirtualMachinesClient
	a, b     armmsi.Identity
	rgID     string
	envLines []string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	logs := &cloudtest.SyncBuffer{}
	c := cloudtest.Start(t, cloud.Options{Logger: cloudtest.DebugLogger(logs), ARM: cloudtest.FastARM()})
	f := &fixture{c: c, s: c.Settings(), logs: logs, cred: cloudtest.OwnerCred(t, c), opts: cloudtest.ARMOptions(c)}
	f.rgID = cloudtest.CreateGroup(t, c, f.cred, f.opts, "westeurope", "rg")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(f.s.SubscriptionID, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, into := range map[string]*armmsi.Identity{"id-a": &f.a, "id-b": &f.b} {
		mi, err := ids.CreateOrUpdate(ctx, "rg", name, armmsi.Identity{Location: new("westeurope")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		*into = mi.Identity
	}
	f.vms, err = armcompute.NewVirtualMachinesClient(f.s.SubscriptionID, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.vms.BeginCreateOrUpdate(ctx, "rg", "vm1", armcompute.VirtualMachine{
		Location: new("westeurope"),
		Identity: &armcompute.VirtualMachineIdentity{
			Type:                   new(armcompute.ResourceIdentityTypeSystemAssignedUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*f.a.ID: {}},
		},
		Properties: &armcompute.VirtualMachineProperties{HardwareProfile: &armcompute.HardwareProfile{VMSize: new(armcompute.VirtualMachineSizeTypes("Standard_B1s"))}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	f.vm = res.VirtualMachine
	f.envLines, err = cloud.ComputeEnv(f.s.DataDir, *f.vm.ID)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) env(name string) string {
	for _, l := range f.envLines {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return v
		}
	}
	return ""
}

// claims verifies a token with the cloud's keys and returns its claims.
func (f *fixture) claims(t *testing.T, raw string) *entra.AccessClaims {
	t.Helper()
	cl, err := f.c.Entra().Verify(t.Context(), raw, func(string) bool { return true })
	if err != nil {
		t.Fatalf("verify token: %v", err)
	}
	return cl
}

// miCred is azidentity's ManagedIdentityCredential as code on the VM builds it; it reads
// IDENTITY_ENDPOINT and IDENTITY_HEADER from the environment (set by the caller).
func (f *fixture) miCred(t *testing.T, id azidentity.ManagedIDKind) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: cloudtest.NoRetry(f.c), ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// MSAL caches managed-identity tokens per process by identity and scope, so every GetToken in
// these tests asks for a scope of its own.
func scope() string { return "api://cerulean-test-" + uuid.NewString() + "/.default" }

func TestComputeEnvPrintsOnlyTheIdentityVariables(t *testing.T) {
	f := setup(t)
	var names []string
	for _, l := range f.envLines {
		name, _, _ := strings.Cut(l, "=")
		names = append(names, name)
	}
	if strings.Join(names, ",") != "IDENTITY_ENDPOINT,IDENTITY_HEADER,SSL_CERT_FILE" {
		t.Fatalf("names: %v", names)
	}
	all := strings.Join(f.envLines, "\n")
	if strings.Contains(all, f.s.ClientSecret) || strings.Contains(all, f.s.ClientID) {
		t.Fatal("compute env carries the bootstrap credentials")
	}
	if f.env("IDENTITY_ENDPOINT") != f.s.URL+msi.AppServicePath || f.env("SSL_CERT_FILE") != f.s.CAFile {
		t.Fatalf("env: %v", f.envLines)
	}
	for _, bad := range []string{"/subscriptions/x", *f.a.ID, f.rgID} {
		if _, err := cloud.ComputeEnv(f.s.DataDir, bad); err == nil {
			t.Errorf("ComputeEnv(%s) accepted a non-compute id", bad)
		}
	}
}

func TestManagedIdentityCredentialThroughIdentityEndpoint(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	t.Setenv("IDENTITY_ENDPOINT", f.env("IDENTITY_ENDPOINT"))
	t.Setenv("IDENTITY_HEADER", f.env("IDENTITY_HEADER"))

	get := func(cred azcore.TokenCredential, sc string) (string, error) {
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{sc}})
		return tok.Token, err
	}
	// System-assigned: the VM's own principal, xms_mirid = the VM.
	raw, err := get(f.miCred(t, nil), "https://vault.azure.net/.default")
	if err != nil {
		t.Fatal(err)
	}
	cl := f.claims(t, raw)
	if cl.ObjectID != *f.vm.Identity.PrincipalID || cl.MIResource != *f.vm.ID || cl.Audience[0] != "https://vault.azure.net" || cl.IDType != "app" {
		t.Fatalf("system-assigned token claims: %+v", cl)
	}
	// User-assigned, by each selector.
	for name, id := range map[string]azidentity.ManagedIDKind{
		"client id":   azidentity.ClientID(*f.a.Properties.ClientID),
		"object id":   azidentity.ObjectID(*f.a.Properties.PrincipalID),
		"resource id": azidentity.ResourceID(*f.a.ID),
	} {
		raw, err := get(f.miCred(t, id), scope())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cl := f.claims(t, raw); cl.ObjectID != *f.a.Properties.PrincipalID || cl.AppID != *f.a.Properties.ClientID || cl.MIResource != *f.a.ID {
			t.Fatalf("%s: claims %+v", name, cl)
		}
	}
	// An identity that exists but is not assigned to the VM gets nothing.
	for name, id := range map[string]azidentity.ManagedIDKind{
		"client id":   azidentity.ClientID(*f.b.Properties.ClientID),
		"resource id": azidentity.ResourceID(*f.b.ID),
	} {
		_, err := get(f.miCred(t, id), scope())
		if err == nil {
			t.Fatalf("%s: a token for an identity not assigned to the VM", name)
		}
		if strings.Contains(err.Error(), f.env("IDENTITY_HEADER")) {
			t.Fatalf("the error shows the identity header: %v", err)
		}
	}

	// The token works at ARM: authenticated, then authorized once the identity has a role.
	groups, err := armresources.NewResourceGroupsClient(f.s.SubscriptionID, f.miCred(t, azidentity.ClientID(*f.a.Properties.ClientID)), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = groups.Get(ctx, "rg", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden || re.ErrorCode != "AuthorizationFailed" {
		t.Fatalf("without a role: %v", err)
	}
	name := uuid.NewString()
	now := time.Now().UTC()
	if err := f.c.ARM().Authz().Ensure(ctx, authz.Assignment{
		ID: authz.AssignmentID(f.rgID, name), Name: name, Scope: f.rgID, RoleDefinitionID: authz.Reader,
		PrincipalID: *f.a.Properties.PrincipalID, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := groups.Get(ctx, "rg", nil); err != nil {
		t.Fatalf("with Reader: %v", err)
	}

	// Removing the identity from the VM stops its tokens.
	up, err := f.vms.BeginUpdate(ctx, "rg", "vm1", armcompute.VirtualMachineUpdate{Identity: &armcompute.VirtualMachineIdentity{
		Type: new(armcompute.ResourceIdentityTypeSystemAssigned),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	if _, err := get(f.miCred(t, azidentity.ClientID(*f.a.Properties.ClientID)), scope()); err == nil {
		t.Fatal("a token for an identity removed from the VM")
	}
	if logs := f.logs.String(); strings.Contains(logs, f.env("IDENTITY_HEADER")) || strings.Contains(logs, raw) {
		t.Fatal("the logs carry the identity header or a token")
	}
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (f *fixture) get(t *testing.T, path string, q url.Values, h map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.s.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: f.c.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(b)}
	if err := json.Unmarshal(b, &a.body); err != nil {
		t.Fatalf("GET %s: %d answer is not JSON: %q", path, resp.StatusCode, b)
	}
	return a
}

func TestIMDSEndpoint(t *testing.T) {
	f := setup(t)
	header := f.env("IDENTITY_HEADER")
	q := func(kv ...string) url.Values {
		v := url.Values{"api-version": {"2018-02-01"}, "resource": {"https://management.azure.com/"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	ok := map[string]string{"Metadata": "true", msi.HeaderName: header}

	// DefaultAzureCredential's probe: no Metadata header, no query. Any answer will do; this is IMDS's.
	a := f.get(t, msi.IMDSPath, nil, nil)
	if a.status != http.StatusBadRequest || a.body["error"] != "invalid_request" || a.body["error_description"] != "Required metadata header not specified" {
		t.Fatalf("probe: %d %v", a.status, a.body)
	}
	// Success: IMDS's shape, numbers as strings.
	a = f.get(t, msi.IMDSPath, q(), ok)
	if a.status != http.StatusOK {
		t.Fatalf("token: %d %v", a.status, a.body)
	}
	exp, err := strconv.ParseInt(a.body["expires_on"].(string), 10, 64)
	if err != nil || exp <= time.Now().Unix() || a.body["expires_in"] != "3599" || a.body["token_type"] != "Bearer" ||
		a.body["resource"] != "https://management.azure.com/" || a.body["refresh_token"] != "" || a.body["not_before"] == nil {
		t.Fatalf("token body: %v", a.body)
	}
	cl := f.claims(t, a.body["access_token"].(string))
	if cl.ObjectID != *f.vm.Identity.PrincipalID || a.body["client_id"] != cl.AppID {
		t.Fatalf("claims: %+v", cl)
	}
	for _, sel := range [][]string{
		{"client_id", *f.a.Properties.ClientID}, {"object_id", *f.a.Properties.PrincipalID},
		{"msi_res_id", *f.a.ID}, {"mi_res_id", strings.ToUpper(*f.a.ID)},
	} {
		a := f.get(t, msi.IMDSPath, q(sel...), ok)
		if a.status != http.StatusOK || a.body["client_id"] != *f.a.Properties.ClientID {
			t.Fatalf("%s: %d %v", sel[0], a.status, a.body)
		}
	}
	// Refusals: nothing issued, nothing of the header echoed.
	for _, tc := range []struct {
		name   string
		q      url.Values
		h      map[string]string
		status int
		code   string
	}{
		{"not assigned", q("client_id", *f.b.Properties.ClientID), ok, http.StatusBadRequest, "invalid_request"},
		{"unknown client id", q("client_id", uuid.NewString()), ok, http.StatusBadRequest, "invalid_request"},
		{"two selectors", q("client_id", *f.a.Properties.ClientID, "object_id", *f.a.Properties.PrincipalID), ok, http.StatusBadRequest, "invalid_request"},
		{"no resource", url.Values{"api-version": {"2018-02-01"}}, ok, http.StatusBadRequest, "invalid_request"},
		{"a v2 scope", q("resource", "https://vault.azure.net/.default"), ok, http.StatusBadRequest, "invalid_resource"},
		{"old api-version", q("api-version", "2017-09-01"), ok, http.StatusBadRequest, "invalid_request"},
		{"no identity header", q(), map[string]string{"Metadata": "true"}, http.StatusUnauthorized, "invalid_request"},
		{"tampered header", q(), map[string]string{"Metadata": "true", msi.HeaderName: header[:len(header)-2] + "AA"}, http.StatusUnauthorized, "invalid_request"},
	} {
		a := f.get(t, msi.IMDSPath, tc.q, tc.h)
		if a.status != tc.status || a.body["error"] != tc.code || a.body["access_token"] != nil {
			t.Errorf("%s: %d %v, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
		if strings.Contains(a.raw, header[3:20]) {
			t.Errorf("%s: the answer echoes the identity header", tc.name)
		}
	}
	if a := f.get(t, msi.IMDSPath, q("client_id", *f.b.Properties.ClientID), ok); a.body["error_description"] != "Identity not found" {
		t.Errorf("not assigned: %v", a.body)
	}

	// App Service style: its error shape, numeric expires_on.
	a = f.get(t, msi.AppServicePath, url.Values{"api-version": {msi.AppServiceAPIVersion}, "resource": {"https://vault.azure.net"}}, map[string]string{msi.HeaderName: header})
	if _, isNum := a.body["expires_on"].(float64); a.status != http.StatusOK || !isNum {
		t.Fatalf("app service token: %d %v", a.status, a.body)
	}
	a = f.get(t, msi.AppServicePath, url.Values{"api-version": {msi.AppServiceAPIVersion}, "resource": {"https://vault.azure.net"}, "client_id": {*f.b.Properties.ClientID}},
		map[string]string{msi.HeaderName: header})
	if a.status != http.StatusBadRequest || a.body["statusCode"] != float64(400) || a.body["message"] == nil {
		t.Fatalf("app service refusal: %d %v", a.status, a.body)
	}
}

func TestScaleSetNodeAgent(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	ss, err := armcompute.NewVirtualMachineScaleSetsClient(f.s.SubscriptionID, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ss.BeginCreateOrUpdate(ctx, "rg", "nodes", armcompute.VirtualMachineScaleSet{
		Location: new("westeurope"),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{
			Type:                   new(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*f.b.ID: {}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := cloud.ComputeEnv(f.s.DataDir, *res.ID)
	if err != nil {
		t.Fatal(err)
	}
	header := strings.TrimPrefix(lines[1], "IDENTITY_HEADER=")
	q := url.Values{"api-version": {"2019-08-01"}, "resource": {"https://vault.azure.net"}}
	h := map[string]string{"Metadata": "true", msi.HeaderName: header}
	// With no selector, the only user-assigned identity answers; the VM's identity does not.
	if a := f.get(t, msi.IMDSPath, q, h); a.status != http.StatusOK || a.body["client_id"] != *f.b.Properties.ClientID {
		t.Fatalf("scale set default identity: %d %v", a.status, a.body)
	}
	q.Set("client_id", *f.a.Properties.ClientID)
	if a := f.get(t, msi.IMDSPath, q, h); a.status != http.StatusBadRequest {
		t.Fatalf("the VM's identity through the scale set's header: %d %v", a.status, a.body)
	}
	// Deleting the scale set makes its header worthless.
	dp, err := ss.BeginDelete(ctx, "rg", "nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	q.Del("client_id")
	if a := f.get(t, msi.IMDSPath, q, h); a.status != http.StatusBadRequest {
		t.Fatalf("after delete: %d %v", a.status, a.body)
	}
}

func TestHeaderSecrets(t *testing.T) {
	key := make([]byte, 32)
	s, err := msi.NewSecrets(key)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := msi.NewSecrets(append(make([]byte, 31), 1))
	vm := "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"
	id := mustParse(t, vm)
	h := s.Header(id)
	got, err := s.Resource(h)
	if err != nil || got.Key() != id.Key() {
		t.Fatalf("round trip: %v %v", got, err)
	}
	// Ids are case-insensitive: a header made from another spelling names the same resource.
	if got, err := s.Resource(s.Header(mustParse(t, strings.ToLower(vm)))); err != nil || got.Key() != id.Key() {
		t.Fatalf("lower-case id: %v %v", got, err)
	}
	for name, bad := range map[string]string{
		"empty": "", "other key": other.Header(id), "truncated": h[:len(h)-1], "no version": strings.TrimPrefix(h, "v1."),
		"not compute": s.Header(mustParse(t, "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg")),
	} {
		if _, err := s.Resource(bad); !errors.Is(err, msi.ErrBadHeader) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := msi.NewSecrets(key[:16]); err == nil {
		t.Error("a short key was accepted")
	}
}

func mustParse(t *testing.T, s string) armid.ID {
	t.Helper()
	id, err := armid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A restart keeps the header key: the same header works, and the endpoint file follows the port.
func TestIdentityHeaderSurvivesRestart(t *testing.T) {
	f := setup(t)
	header := f.env("IDENTITY_HEADER")
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := cloud.Start(t.Context(), cloud.Options{Addr: "127.0.0.1:0", DataDir: f.s.DataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f.c, f.s = c, c.Settings()
	lines, err := cloud.ComputeEnv(f.s.DataDir, *f.vm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if lines[0] != "IDENTITY_ENDPOINT="+f.s.URL+msi.AppServicePath || lines[1] != "IDENTITY_HEADER="+header {
		t.Fatalf("after restart: %v", lines)
	}
	a := f.get(t, msi.AppServicePath, url.Values{"api-version": {msi.AppServiceAPIVersion}, "resource": {"https://vault.azure.net"}},
		map[string]string{msi.HeaderName: header})
	if a.status != http.StatusOK || f.claims(t, a.body["access_token"].(string)).MIResource != *f.vm.ID {
		t.Fatalf("token after restart: %d %v", a.status, a.body)
	}
}
