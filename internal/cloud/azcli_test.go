package cloud_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/testenv"
)

// TestCloudMetadata checks ARM's cloud-metadata document in each shape a client asks for.
func TestCloudMetadata(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	get := func(version string, v any) int {
		t.Helper()
		u := s.URL + "/metadata/endpoints"
		if version != "" {
			u += "?api-version=" + version
		}
		status, body := e.getRaw(t, u)
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("api-version %s: %d %s: %v", version, status, body, err)
		}
		return status
	}
	audiences := []any{"https://management.core.windows.net/", "https://management.azure.com/"}

	// 2022-09-01 (and 2020-06-01): the one cloud, with the Entra authority, for the SDKs.
	for _, v := range []string{"2022-09-01", "2020-06-01"} {
		var doc map[string]any
		if status := get(v, &doc); status != http.StatusOK {
			t.Fatalf("%s: status %d", v, status)
		}
		auth := doc["authentication"].(map[string]any)
		if doc["name"] != "Cerulean" || doc["resourceManager"] != s.URL+"/" || auth["loginEndpoint"] != s.AuthorityHost ||
			!equalJSON(auth["audiences"], audiences) || auth["identityProvider"] != "AAD" {
			t.Errorf("%s: %v", v, doc)
		}
	}
	// 2019-05-01: a list of clouds, as the CLI's ARM_CLOUD_METADATA_URL expects, with the
	// ADFS-style authority the CLI can use without instance discovery.
	var list []map[string]any
	if status := get("2019-05-01", &list); status != http.StatusOK || len(list) != 1 {
		t.Fatalf("2019-05-01: %d %v", status, list)
	}
	if auth := list[0]["authentication"].(map[string]any); list[0]["name"] != "Cerulean" || auth["loginEndpoint"] != s.URL+"/adfs" ||
		auth["tenant"] != "adfs" || list[0]["suffixes"].(map[string]any)["keyVaultDns"] != "vault.azure.net" {
		t.Errorf("2019-05-01: %v", list[0])
	}
	// 2015-01-01: msrestazure's shape, read by `az cloud register --endpoint-resource-manager`.
	var legacy map[string]any
	if status := get("2015-01-01", &legacy); status != http.StatusOK {
		t.Fatalf("2015-01-01: status %d", status)
	}
	if auth := legacy["authentication"].(map[string]any); auth["loginEndpoint"] != s.URL+"/adfs" ||
		!equalJSON(auth["audiences"], audiences) || legacy["graphEndpoint"] == nil {
		t.Errorf("2015-01-01: %v", legacy)
	}
	// Errors in ARM's shape.
	for version, code := range map[string]string{"": "MissingApiVersionParameter", "2016-01-01": "InvalidApiVersionParameter"} {
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if status := get(version, &body); status != http.StatusBadRequest || body.Error.Code != code {
			t.Errorf("api-version %q: %d %+v, want 400 %s", version, status, body, code)
		}
	}
	// `az login --tenant adfs` resolves "adfs" under the ADFS authority.
	status, adfs := e.do(t, http.MethodGet, s.URL+"/adfs/adfs/.well-known/openid-configuration", "", nil)
	if status != http.StatusOK || adfs["issuer"] != s.URL+"/"+s.TenantID+"/v2.0" {
		t.Errorf("ADFS tenant resolution: %d %v", status, adfs)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func (e *env) getRaw(t *testing.T, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, b
}

// azCLI runs the real Azure CLI against one cloud, with its state in a temporary directory.
type azCLI struct {
	e      *env
	config string
	extra  []string // more environment
}

// needAz finds the Azure CLI: in CI its absence is a failure (make test-deps installs it), on a
// developer's machine a skip.
func needAz(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("az"); err != nil {
		testenv.Missing(t, "the Azure CLI (az) is not installed; hack/install-azure-cli.sh (make test-deps) installs it")
	}
}

func newAzCLI(t *testing.T, e *env, extra ...string) *azCLI {
	t.Helper()
	return &azCLI{e: e, config: t.TempDir(), extra: extra}
}

// run runs az with args and returns stdout; the error and stderr otherwise.
func (a *azCLI) run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	// A bound against a hung CLI, not an assertion about its speed.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "az", append(args, "--only-show-errors")...)
	var env []string
	for _, kv := range os.Environ() {
		// The CLI reads AZURE_* as configuration; none of the caller's may leak in.
		if !strings.HasPrefix(kv, "AZURE_") && !strings.HasPrefix(kv, "ARM_") && !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "SSL_CERT_FILE=") &&
			!strings.HasPrefix(strings.ToUpper(kv), "HTTPS_PROXY=") && !strings.HasPrefix(strings.ToUpper(kv), "HTTP_PROXY=") &&
			!strings.HasPrefix(strings.ToUpper(kv), "NO_PROXY=") {
			env = append(env, kv)
		}
	}
	s := a.e.c.Settings()
	env = append(env,
		"AZURE_CONFIG_DIR="+a.config,
		"REQUESTS_CA_BUNDLE="+s.CAFile,
		// ARM_CLOUD_METADATA_URL is fetched with urllib, which trusts SSL_CERT_FILE, not requests' bundle.
		"SSL_CERT_FILE="+s.CAFile,
		"AZURE_CORE_COLLECT_TELEMETRY=false",
		"AZURE_CORE_NO_COLOR=true",
		"AZURE_CORE_SURVEY_MESSAGE=false",
		// Nothing may leave this machine: every host but the cloud's goes to a closed port.
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=127.0.0.1,localhost",
		"https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9", "no_proxy=127.0.0.1,localhost",
	)
	cmd.Env = append(env, a.extra...)
	cmd.Dir = a.config
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// must runs az and fails the test if it fails. Arguments and output are shown with the
// bootstrap secret redacted.
func (a *azCLI) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := a.run(t, args...)
	if err != nil {
		t.Fatalf("az %s: %v\n%s", a.redact(strings.Join(args, " ")), err, a.redact(errOut))
	}
	return out
}

func (a *azCLI) redact(s string) string {
	return strings.ReplaceAll(s, a.e.c.Settings().ClientSecret, "REDACTED")
}

func (a *azCLI) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out := a.must(t, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("az %s: decode %q: %v", strings.Join(args, " "), out, err)
	}
}

// TestAzureCLI runs the Azure CLI in Debian (2.45) through what a user does with the local cloud:
// register it from its ARM endpoint alone, log in with the service principal's secret (and fail
// with a wrong one) and certificate through the ADFS-style authority, create a resource group
// and a user-assigned identity; the Go SDK then finds both with the ids the CLI printed.
func TestAzureCLI(t *testing.T) {
	needAz(t)
	e := start(t, "")
	s := e.c.Settings()
	az := newAzCLI(t, e)

	// Registering with the ARM endpoint alone: the CLI reads the rest from the 2015-01-01
	// metadata document.
	az.must(t, "cloud", "register", "-n", "Cerulean", "--endpoint-resource-manager", s.ResourceManagerEndpoint, "-o", "none")
	az.must(t, "cloud", "set", "-n", "Cerulean")
	var endpoints struct {
		Endpoints map[string]any `json:"endpoints"`
	}
	az.json(t, &endpoints, "cloud", "show")
	if got := endpoints.Endpoints["activeDirectory"]; got != s.URL+"/adfs" {
		t.Errorf("activeDirectory = %v, want %s/adfs", got, s.URL)
	}

	// A wrong secret: the CLI reports Entra's error.
	_, errOut, err := az.run(t, "login", "--service-principal", "-u", s.ClientID, "-p", "not-the-secret", "--tenant", "adfs", "-o", "none")
	if err == nil || !strings.Contains(errOut, "AADSTS7000215") {
		t.Errorf("login with a wrong secret: err %v, stderr %q; want a failure mentioning AADSTS7000215", err, az.redact(errOut))
	}

	var accounts []struct {
		ID, TenantID string
		User         struct{ Name, Type string }
	}
	az.json(t, &accounts, "login", "--service-principal", "-u", s.ClientID, "-p", s.ClientSecret, "--tenant", "adfs")
	if len(accounts) != 1 || accounts[0].ID != s.SubscriptionID || accounts[0].TenantID != s.TenantID ||
		accounts[0].User.Name != s.ClientID || accounts[0].User.Type != "servicePrincipal" {
		t.Fatalf("login: %+v", accounts)
	}

	var group struct {
		ID         string
		Properties struct{ ProvisioningState string }
	}
	az.json(t, &group, "group", "create", "-n", "rg-cli", "-l", "westeurope")
	wantGroup := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-cli"
	if !strings.EqualFold(group.ID, wantGroup) || group.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("group create: %+v", group)
	}
	var identity struct{ ID, ClientID, PrincipalID, TenantID string }
	az.json(t, &identity, "identity", "create", "-g", "rg-cli", "-n", "id-cli")
	if identity.ID != wantGroup+"/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-cli" ||
		identity.ClientID == "" || identity.PrincipalID == "" || identity.TenantID != s.TenantID {
		t.Errorf("identity create: %+v", identity)
	}

	// The Go SDK sees what the CLI made.
	cred, err := azidentity.NewClientSecretCredential(s.TenantID, s.ClientID, s.ClientSecret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := &arm.ClientOptions{ClientOptions: e.c.ClientOptions()}
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := groups.Get(t.Context(), "rg-cli", nil)
	if err != nil || !strings.EqualFold(*g.ID, wantGroup) || *g.Location != "westeurope" {
		t.Errorf("get group through the SDK: %v %+v", err, g)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ids.Get(t.Context(), "rg-cli", "id-cli", nil)
	if err != nil {
		t.Fatalf("get identity through the SDK: %v", err)
	}
	if *got.ID != identity.ID || *got.Properties.ClientID != identity.ClientID || *got.Properties.PrincipalID != identity.PrincipalID {
		t.Errorf("identity through the SDK = %s %s %s, CLI said %+v", *got.ID, *got.Properties.ClientID, *got.Properties.PrincipalID, identity)
	}

	// The certificate (the PEM holds certificate and key): MSAL Python signs an RS256 assertion
	// with x5t.
	az.must(t, "login", "--service-principal", "-u", s.ClientID, "-p", s.ClientCertificatePath, "--tenant", "adfs", "-o", "none")
	var shown struct{ PrincipalID string }
	az.json(t, &shown, "identity", "show", "-g", "rg-cli", "-n", "id-cli")
	if shown.PrincipalID != identity.PrincipalID {
		t.Errorf("identity show after a certificate login: %+v", shown)
	}

	// Nothing the cloud logged holds the secret or a token.
	if logs := e.logs.String(); strings.Contains(logs, s.ClientSecret) || strings.Contains(logs, "eyJ") {
		t.Error("the cloud's log holds a secret or a token")
	}
}

// TestAzureCLIMetadataURL registers the cloud the other way the CLI offers: ARM_CLOUD_METADATA_URL,
// which replaces the CLI's list of clouds with the 2019-05-01 document's.
func TestAzureCLIMetadataURL(t *testing.T) {
	needAz(t)
	e := start(t, "")
	s := e.c.Settings()
	az := newAzCLI(t, e, "ARM_CLOUD_METADATA_URL="+s.URL+"/metadata/endpoints?api-version=2019-05-01")

	var clouds []struct {
		Name     string
		IsActive bool
	}
	az.json(t, &clouds, "cloud", "list")
	if len(clouds) != 1 || clouds[0].Name != "Cerulean" || !clouds[0].IsActive {
		t.Fatalf("cloud list: %+v", clouds)
	}
	az.must(t, "login", "--service-principal", "-u", s.ClientID, "-p", s.ClientSecret, "--tenant", "adfs", "-o", "none")
	var group struct{ ID string }
	az.json(t, &group, "group", "create", "-n", "rg-meta", "-l", "eastus")
	if !strings.EqualFold(group.ID, "/subscriptions/"+s.SubscriptionID+"/resourceGroups/rg-meta") {
		t.Errorf("group create: %+v", group)
	}
	if _, err := os.Stat(filepath.Join(az.config, "cloudEndpoints.json")); err != nil {
		t.Errorf("the CLI did not cache the metadata: %v", err)
	}
}
