package cloud_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// TestBadInput: every malformed request gets Entra's error shape and a 4xx, writes nothing, and
// the server keeps serving.
func TestBadInput(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	tokenURL := s.URL + "/" + s.TenantID + "/oauth2/v2.0/token"
	form := func(mut func(url.Values)) string {
		f := e.secretForm()
		mut(f)
		return f.Encode()
	}
	const ct = "application/x-www-form-urlencoded"
	cases := []struct {
		name, method, url, contentType, body string
		status, code                         int
	}{
		{"wrong content type", "POST", tokenURL, "application/json", `{"grant_type":"client_credentials"}`, 400, 90014},
		{"bad escape", "POST", tokenURL, ct, "grant_type=client_credentials&client_id=%zz", 400, 90014},
		{"duplicate client_id", "POST", tokenURL, ct, form(func(f url.Values) { f.Add("client_id", "x") }), 400, 90014},
		{"oversized body", "POST", tokenURL, ct, form(func(f url.Values) { f.Set("pad", strings.Repeat("a", 100<<10)) }), 413, 90020},
		{"GET on the token endpoint", "GET", tokenURL, "", "", 405, 900561},
		{"no grant_type", "POST", tokenURL, ct, form(func(f url.Values) { f.Del("grant_type") }), 400, 900144},
		{"password grant", "POST", tokenURL, ct, form(func(f url.Values) { f.Set("grant_type", "password") }), 400, 70003},
		{"no client_id", "POST", tokenURL, ct, form(func(f url.Values) { f.Del("client_id") }), 400, 900144},
		{"no scope", "POST", tokenURL, ct, form(func(f url.Values) { f.Del("scope") }), 400, 900144},
		{"two resources", "POST", tokenURL, ct, form(func(f url.Values) { f.Set("scope", armScope+" https://vault.azure.net/.default") }), 400, 70011},
		{"no .default", "POST", tokenURL, ct, form(func(f url.Values) { f.Set("scope", "https://vault.azure.net/read") }), 400, 70011},
		{"bare .default", "POST", tokenURL, ct, form(func(f url.Values) { f.Set("scope", "/.default") }), 400, 70011},
		{"no credential", "POST", tokenURL, ct, form(func(f url.Values) { f.Del("client_secret") }), 401, 7000218},
		{"secret and assertion", "POST", tokenURL, ct, form(func(f url.Values) { f.Set("client_assertion", "a.b.c") }), 400, 90014},
		{"wrong assertion type", "POST", tokenURL, ct, form(func(f url.Values) {
			f.Del("client_secret")
			f.Set("client_assertion", "a.b.c")
			f.Set("client_assertion_type", "urn:other")
		}), 400, 90014},
		{"oversized assertion", "POST", tokenURL, ct, form(func(f url.Values) {
			f.Del("client_secret")
			f.Set("client_assertion", strings.Repeat("a", 40<<10))
			f.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		}), 400, 50027},
		{"unknown tenant", "POST", s.URL + "/0b0b0b0b-0000-0000-0000-000000000000/oauth2/v2.0/token", ct, form(func(url.Values) {}), 400, 90002},
		{"tenant that is no id", "POST", s.URL + "/contoso.onmicrosoft.com/oauth2/v2.0/token", ct, form(func(url.Values) {}), 400, 90002},
		{"common tenant", "POST", s.URL + "/common/oauth2/v2.0/token", ct, form(func(url.Values) {}), 400, 50059},
		{"openid configuration of an unknown tenant", "GET", s.URL + "/0b0b0b0b-0000-0000-0000-000000000000/v2.0/.well-known/openid-configuration", "", "", 400, 90002},
		{"foreign instance", "GET", s.URL + "/common/discovery/instance?api-version=1.1&authorization_endpoint=https://evil.example/x/oauth2/v2.0/authorize", "", "", 400, 50049},
		{"unknown path", "GET", s.URL + "/nothing/here", "", "", 404, 900561},
	}
	commits := e.c.Store().Commits()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			status, out := e.do(t, tc.method, tc.url, tc.contentType, body)
			wantEntraError(t, status, out, tc.status, tc.code)
		})
	}
	if got := e.c.Store().Commits(); got != commits {
		t.Errorf("bad requests wrote to the store (%d commits)", got-commits)
	}
	if status, out := e.post(t, s.TenantID, e.secretForm()); status != http.StatusOK {
		t.Fatalf("after bad input: %d %v", status, out)
	}
}

// TestDiscovery checks the documents MSAL reads.
func TestDiscovery(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	status, inst := e.do(t, "GET", s.URL+"/common/discovery/instance?api-version=1.1&authorization_endpoint="+
		url.QueryEscape(s.URL+"/"+s.TenantID+"/oauth2/v2.0/authorize"), "", nil)
	host := strings.TrimPrefix(s.URL, "https://")
	// The tenant is the authorization endpoint's, never a placeholder: MSAL uses the URL as given.
	if status != 200 || inst["tenant_discovery_endpoint"] != s.URL+"/"+s.TenantID+"/v2.0/.well-known/openid-configuration" ||
		inst["metadata"].([]any)[0].(map[string]any)["preferred_network"] != host {
		t.Errorf("instance discovery: %d %v", status, inst)
	}
	status, inst = e.do(t, "GET", s.URL+"/common/discovery/instance?api-version=1.1&authorization_endpoint="+
		url.QueryEscape(s.URL+"/organizations/oauth2/v2.0/authorize"), "", nil)
	if status != 200 || inst["tenant_discovery_endpoint"] != s.URL+"/organizations/v2.0/.well-known/openid-configuration" {
		t.Errorf("instance discovery for organizations: %d %v", status, inst)
	}
	if status, _ := e.do(t, "GET", s.URL+"/common/discovery/instance?api-version=1.1&authorization_endpoint="+
		url.QueryEscape("https://login.example.org/"+s.TenantID+"/oauth2/v2.0/authorize"), "", nil); status != http.StatusBadRequest {
		t.Errorf("instance discovery for an unknown authority: %d, want 400", status)
	}
	status, oidc := e.do(t, "GET", s.URL+"/"+s.TenantID+"/v2.0/.well-known/openid-configuration", "", nil)
	if status != 200 || oidc["issuer"] != s.URL+"/"+s.TenantID+"/v2.0" || oidc["token_endpoint"] != s.URL+"/"+s.TenantID+"/oauth2/v2.0/token" {
		t.Errorf("openid configuration: %d %v", status, oidc)
	}
	status, adfs := e.do(t, "GET", s.URL+"/adfs/.well-known/openid-configuration", "", nil)
	if status != 200 || adfs["token_endpoint"] != oidc["token_endpoint"] {
		t.Errorf("ADFS configuration: %d %v", status, adfs)
	}
	status, keys := e.do(t, "GET", oidc["jwks_uri"].(string), "", nil)
	if status != 200 || len(keys["keys"].([]any)) != 1 {
		t.Errorf("jwks: %d %v", status, keys)
	}
}

func kids(t *testing.T, e *env) []string {
	t.Helper()
	s := e.c.Settings()
	_, keys := e.do(t, "GET", s.URL+"/"+s.TenantID+"/discovery/v2.0/keys", "", nil)
	var out []string
	for _, k := range keys["keys"].([]any) {
		out = append(out, k.(map[string]any)["kid"].(string))
	}
	return out
}

func tokenKid(t *testing.T, raw string) string {
	t.Helper()
	var h struct{ Kid string }
	b, _ := base64Decode(strings.Split(raw, ".")[0])
	_ = json.Unmarshal(b, &h)
	return h.Kid
}

// TestKeyRotationAndRestart: a rotated key stays published until its tokens expire; a restart
// keeps tenant, subscription, principal, secret and keys.
func TestKeyRotationAndRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	s := e.c.Settings()
	status, first := e.post(t, s.TenantID, e.secretForm())
	if status != 200 {
		t.Fatal(first)
	}
	tok1 := first["access_token"].(string)
	kid1 := tokenKid(t, tok1)

	if err := e.c.Entra().RotateKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, second := e.post(t, s.TenantID, e.secretForm())
	tok2 := second["access_token"].(string)
	kid2 := tokenKid(t, tok2)
	if kid1 == kid2 {
		t.Fatal("rotation kept the kid")
	}
	if got := kids(t, e); len(got) != 2 {
		t.Fatalf("after rotation, JWKS = %v, want old and new", got)
	}
	verify(t, e.c, tok1)

	// Restart on the same data dir: same identity, same keys, old tokens still verify.
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	e.c = startWith(t, dir, e.clock, e.logs)
	s2 := e.c.Settings()
	if s2.TenantID != s.TenantID || s2.SubscriptionID != s.SubscriptionID || s2.ClientID != s.ClientID || s2.ClientSecret != s.ClientSecret {
		t.Fatalf("restart changed the bootstrap: %+v vs %+v", s2, s)
	}
	if status, out := e.post(t, s.TenantID, e.secretForm()); status != 200 || tokenKid(t, out["access_token"].(string)) != kid2 {
		t.Fatalf("after restart: %d %v", status, out)
	}
	if got := kids(t, e); len(got) != 2 {
		t.Fatalf("after restart, JWKS = %v", got)
	}

	// Once every token of the old key has expired, it is no longer published.
	e.clock.Advance(entraLifetime + 3*time.Minute)
	if got := kids(t, e); len(got) != 1 || got[0] != kid2 {
		t.Fatalf("after the old key's tokens expired, JWKS = %v, want [%s]", got, kid2)
	}
	if _, err := e.c.Entra().Verify(t.Context(), tok2, func(string) bool { return true }); err == nil {
		t.Fatal("an expired token verified")
	}
	// The key rotates by itself once it is a day old.
	e.clock.Advance(24 * time.Hour)
	_, third := e.post(t, s.TenantID, e.secretForm())
	if k := tokenKid(t, third["access_token"].(string)); k == kid2 {
		t.Fatal("a day-old key still signs")
	}
}

// TestEnvAndSecretsNotLogged checks the env file and that no secret, assertion or token reaches
// the log.
func TestEnvAndSecretsNotLogged(t *testing.T) {
	is := newIssuer(t)
	e := start(t, "", is.caPEM())
	s := e.c.Settings()

	env, err := cloud.ReadEnv(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	if env != cloud.FormatEnv(e.c.Env()) {
		t.Errorf("env file %q differs from Env() %q", env, e.c.Env())
	}
	for _, want := range []string{
		"export AZURE_TENANT_ID=" + s.TenantID + "\n", "export AZURE_SUBSCRIPTION_ID=" + s.SubscriptionID + "\n",
		"export AZURE_CLIENT_ID=" + s.ClientID + "\n", "export AZURE_CLIENT_SECRET=" + s.ClientSecret + "\n",
		"export AZURE_CLIENT_CERTIFICATE_PATH=" + filepath.Join(e.dir, "bootstrap-client.pem") + "\n",
		"export AZURE_AUTHORITY_HOST=" + s.URL + "/\n", "export AZURE_RESOURCE_MANAGER_ENDPOINT=" + s.URL + "\n",
		"export AZURE_RESOURCE_MANAGER_AUDIENCE=https://management.core.windows.net/\n",
		"export SSL_CERT_FILE=" + filepath.Join(e.dir, "ca.pem") + "\n", "export CERULEAN_CLOUD_DATA_DIR=" + e.dir + "\n",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	if _, err := os.Stat(s.ClientCertificatePath); err != nil {
		t.Fatal(err)
	}

	var secrets []string
	secrets = append(secrets, s.ClientSecret)
	status, ok := e.post(t, s.TenantID, e.secretForm())
	if status != 200 {
		t.Fatal(ok)
	}
	secrets = append(secrets, ok["access_token"].(string))
	bad := e.secretForm()
	bad.Set("client_secret", "wrong-secret-value-"+strings.Repeat("x", 20))
	e.post(t, s.TenantID, bad)
	secrets = append(secrets, bad.Get("client_secret"))
	assertion := is.token(t, "sub", exchangeAudience, time.Now())
	e.post(t, s.TenantID, url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion}, "scope": {armScope}})
	secrets = append(secrets, assertion)
	certs, key := bootstrapKey(t, s)
	cred, _ := azidentity.NewClientCertificateCredential(s.TenantID, s.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true})
	tok, err := getToken(t, cred, armScope)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, tok.Token)

	logs := e.logs.String()
	if !strings.Contains(logs, "Served request") || !strings.Contains(logs, "Rejected request") {
		t.Fatalf("expected request logs, got:\n%s", logs)
	}
	for _, sec := range secrets {
		// Any long piece of a secret or token would do; the middle of each is checked too.
		for _, piece := range []string{sec, sec[len(sec)/3 : len(sec)/3+16]} {
			if strings.Contains(logs, piece) {
				t.Errorf("log contains a secret or token piece %q", piece)
			}
		}
	}
}

// entraLifetime is the access-token lifetime.
const entraLifetime = 3599 * time.Second

// TestSecondCloudOnOneDataDir: a second cloud on a running cloud's directory fails fast with
// ErrLocked and leaves the running cloud's env file alone.
func TestSecondCloudOnOneDataDir(t *testing.T) {
	e := start(t, "")
	before, err := cloud.ReadEnv(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cloud.Start(t.Context(), cloud.Options{Addr: "127.0.0.1:0", DataDir: e.dir})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second start: got %v, want store.ErrLocked", err)
	}
	if after, err := cloud.ReadEnv(e.dir); err != nil || after != before {
		t.Fatalf("env file changed by the failed start: %v", err)
	}
}

// TestCAEClaimsAccepted: a client opting into continuous access evaluation sends a claims
// parameter; it is accepted.
func TestCAEClaimsAccepted(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	cred := secretCred(t, e.c, s.TenantID, s.ClientID, s.ClientSecret)
	if _, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{armScope}, EnableCAE: true}); err != nil {
		t.Fatalf("get token with CAE: %v", err)
	}
	f := e.secretForm()
	f.Set("claims", `{"access_token":{"xms_cc":{"values":["CP1"]}}}`)
	if status, out := e.post(t, s.TenantID, f); status != http.StatusOK {
		t.Fatalf("claims parameter: %d %v", status, out)
	}
}
