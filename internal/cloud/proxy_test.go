package cloud_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// startProxied starts a cloud with its proxy on a free port.
func startProxied(t *testing.T) *env {
	t.Helper()
	e := &env{clock: newClock(), logs: &cloudtest.SyncBuffer{}, dir: t.TempDir()}
	e.c = cloudtest.Start(t, cloud.Options{
		DataDir: e.dir, Clock: e.clock.Now, Logger: cloudtest.DebugLogger(e.logs), ProxyAddr: "0", ARM: cloudtest.FastARM(),
	})
	return e
}

// proxyEnv is the environment of a client that knows nothing but what `cerulean-local cloud env
// --proxy` prints (and PATH and HOME): no AZURE_* or proxy setting of the caller leaks in.
func proxyEnv(t *testing.T, c *cloud.Cloud) []string {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	return append(env, c.ProxyEnv()...) // plain values: none needs shell quoting here
}

// TestProxyEnv: the proxy's exports name the proxy, loopback as NO_PROXY, the CA for each
// runtime and the bootstrap principal, and no endpoint; the file `cloud env --proxy` prints
// holds the same, 0600, and the CA's key stays 0600 in the data directory.
func TestProxyEnv(t *testing.T) {
	e := startProxied(t)
	s := e.c.Settings()
	got := map[string]string{}
	for _, l := range e.c.ProxyEnv() {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	want := map[string]string{
		"HTTPS_PROXY": s.ProxyURL, "NO_PROXY": "127.0.0.1,localhost,::1", "SSL_CERT_FILE": s.CAFile,
		"REQUESTS_CA_BUNDLE": s.CAFile, "NODE_EXTRA_CA_CERTS": s.CAFile, "AZURE_TENANT_ID": s.TenantID,
		"AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_CLIENT_ID": s.ClientID, "AZURE_CLIENT_SECRET": s.ClientSecret,
	}
	if len(got) != len(want) {
		t.Errorf("proxy env has %d variables, want %d: %v", len(got), len(want), keys(got))
	}
	for k, v := range want {
		if got[k] != v || v == "" {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !strings.HasPrefix(s.ProxyURL, "http://127.0.0.1:") || s.ProxyURL != e.c.Proxy().URL() {
		t.Errorf("ProxyURL = %q (proxy at %s)", s.ProxyURL, e.c.Proxy().URL())
	}
	file, err := cloud.ReadProxyEnv(e.dir)
	if err != nil || file != cloud.FormatEnv(e.c.ProxyEnv()) {
		t.Errorf("proxy.env = %q, %v", file, err)
	}
	for _, f := range []string{cloud.ProxyEnvFile, "ca-key.pem"} {
		if fi, err := os.Stat(filepath.Join(e.dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi, err)
		}
	}
	// A cloud without a proxy writes no proxy.env, and says how to get one.
	plain := start(t, "")
	if _, err := cloud.ReadProxyEnv(plain.dir); err == nil || !strings.Contains(err.Error(), "--proxy-addr") {
		t.Errorf("proxy env of a cloud without a proxy: %v", err)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestGoSDKDefaultsThroughProxy runs a Go program that uses the Azure SDK with no option at
// all (public cloud, DefaultAzureCredential(nil), azsecrets with challenge verification) and
// only the proxy's environment: it creates a resource group, an identity and a vault and
// writes and reads a secret, all under Azure's public names.
func TestGoSDKDefaultsThroughProxy(t *testing.T) {
	e := startProxied(t)
	s := e.c.Settings()
	bin := filepath.Join(t.TempDir(), "proxyclient")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/proxyclient")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the client: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), bin, "rg-proxy", "kvproxy1", s.ObjectID)
	cmd.Env = proxyEnv(t, e.c)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client: %v\n%s\ncloud log:\n%s", err, strings.ReplaceAll(stderr.String(), s.ClientSecret, "REDACTED"), tail(e.logs.String(), 4000))
	}
	var got map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("decode %q: %v", stdout.String(), err)
	}
	if want := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-proxy"; !strings.EqualFold(got["groupId"], want) {
		t.Errorf("groupId = %s, want %s", got["groupId"], want)
	}
	if got["vaultUri"] != "https://kvproxy1.vault.azure.net/" {
		t.Errorf("vaultUri = %s, want https://kvproxy1.vault.azure.net/", got["vaultUri"])
	}
	if got["secretValue"] != "s3cret-value" || !strings.HasPrefix(got["secretId"], "https://kvproxy1.vault.azure.net/secrets/db-password/") {
		t.Errorf("secret: %v", got)
	}
	// What the client made is the cloud's, seen over its loopback origin with the loopback names.
	if v, err := e.c.KeyVault().Vault(t.Context(), "kvproxy1"); err != nil || v.URI() == got["vaultUri"] {
		t.Errorf("vault in the cloud: %v %v", v.URI(), err)
	}
	if p, err := e.c.Entra().Directory.Principal(t.Context(), s.TenantID, got["identityClientId"]); err != nil || p.DisplayName != "app" {
		t.Errorf("identity in the cloud: %+v %v", p, err)
	}
	// MSAL asked login.microsoftonline.com about the authority, as ASO's does, and got it.
	logs := e.logs.String()
	if !strings.Contains(logs, `"path":"/common/discovery/instance","status":200`) {
		t.Error("no instance discovery was answered; the test would not show what unmodified clients need")
	}
	// Every name the client used got its leaf.
	for _, host := range []string{"login.microsoftonline.com", "management.azure.com", "kvproxy1.vault.azure.net"} {
		if !strings.Contains(logs, `"msg":"Proxy issued a certificate","service":"proxy","host":"`+host+`"`) {
			t.Errorf("no certificate issued for %s", host)
		}
	}
	if strings.Contains(logs, s.ClientSecret) || strings.Contains(logs, "eyJ") {
		t.Error("the cloud's log holds a secret or a token")
	}
}

// TestPublicNamesAnswers checks, request by request, how the name a request reached the cloud
// under decides its answers: instance discovery names the tenant for the public and the
// loopback authority, the OpenID configuration and tokens carry the public issuer under the
// public name, and ARM accepts tokens of either issuer.
func TestPublicNamesAnswers(t *testing.T) {
	e := startProxied(t)
	s := e.c.Settings()
	proxyURL, _ := url.Parse(s.ProxyURL)
	tr := e.c.Transport()
	tr.Proxy = func(r *http.Request) (*url.URL, error) { // as NO_PROXY has it: loopback direct
		if r.URL.Hostname() == "127.0.0.1" {
			return nil, nil
		}
		return proxyURL, nil
	}
	pub := &http.Client{Transport: tr}
	getJSON := func(c *http.Client, u string) (int, map[string]any) {
		t.Helper()
		res, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	const login = "https://login.microsoftonline.com"
	for _, tc := range []struct{ asked, authority, want string }{
		{login, login, login + "/" + s.TenantID + "/v2.0/.well-known/openid-configuration"},
		{login, s.URL, s.URL + "/" + s.TenantID + "/v2.0/.well-known/openid-configuration"},
		{s.URL, login, login + "/" + s.TenantID + "/v2.0/.well-known/openid-configuration"},
		{s.URL, s.URL, s.URL + "/" + s.TenantID + "/v2.0/.well-known/openid-configuration"},
	} {
		u := tc.asked + "/common/discovery/instance?api-version=1.1&authorization_endpoint=" + url.QueryEscape(tc.authority+"/"+s.TenantID+"/oauth2/v2.0/authorize")
		status, inst := getJSON(pub, u)
		if status != 200 || inst["tenant_discovery_endpoint"] != tc.want {
			t.Errorf("discovery asked at %s about %s: %d %v, want %s", tc.asked, tc.authority, status, inst, tc.want)
		}
	}
	status, oidc := getJSON(pub, login+"/"+s.TenantID+"/v2.0/.well-known/openid-configuration")
	if status != 200 || oidc["issuer"] != login+"/"+s.TenantID+"/v2.0" || oidc["token_endpoint"] != login+"/"+s.TenantID+"/oauth2/v2.0/token" {
		t.Errorf("public openid configuration: %d %v", status, oidc)
	}
	status, oidc = getJSON(pub, s.URL+"/"+s.TenantID+"/v2.0/.well-known/openid-configuration")
	if status != 200 || oidc["issuer"] != s.URL+"/"+s.TenantID+"/v2.0" {
		t.Errorf("loopback openid configuration: %d %v", status, oidc)
	}
	// A token from each name; ARM takes both, under both names.
	token := func(base string) string {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret},
			"scope": {"https://management.core.windows.net//.default"}}
		res, err := pub.PostForm(base+"/"+s.TenantID+"/oauth2/v2.0/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		_ = json.NewDecoder(res.Body).Decode(&tok)
		claims, err := e.c.Entra().Verify(t.Context(), tok.AccessToken, func(string) bool { return true })
		if err != nil {
			t.Fatalf("token from %s: %v", base, err)
		}
		wantIss := base + "/" + s.TenantID + "/v2.0"
		if claims.Issuer != wantIss {
			t.Errorf("token from %s: iss %s, want %s", base, claims.Issuer, wantIss)
		}
		return tok.AccessToken
	}
	for _, tok := range []string{token(login), token(s.URL)} {
		for _, arm := range []string{"https://management.azure.com", s.URL} {
			req, _ := http.NewRequest(http.MethodGet, arm+"/subscriptions/"+s.SubscriptionID+"/resourcegroups?api-version=2021-04-01", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := pub.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("ARM at %s: %d", arm, res.StatusCode)
			}
		}
	}
	// A long-running operation's URLs name the host ARM was reached under.
	tok := token(login)
	for arm, want := range map[string]string{"https://management.azure.com": "https://management.azure.com/", s.URL: s.URL + "/"} {
		cloudtest.CreateGroup(t, e.c, cloudtest.OwnerCred(t, e.c), cloudtest.ARMOptions(e.c), "westeurope", "rg-lro")
		req, _ := http.NewRequest(http.MethodDelete, arm+"/subscriptions/"+s.SubscriptionID+"/resourcegroups/rg-lro?api-version=2021-04-01", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := pub.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusAccepted || !strings.HasPrefix(res.Header.Get("Location"), want) {
			t.Errorf("DELETE at %s: %d, Location %q, want a URL under %s", arm, res.StatusCode, res.Header.Get("Location"), want)
		}
		// Wait for the deletion to end before the next round re-creates the group.
		for i := 0; i < 200; i++ {
			poll, _ := http.NewRequest(http.MethodGet, res.Header.Get("Location"), nil)
			poll.Header.Set("Authorization", "Bearer "+tok)
			pr, err := pub.Do(poll)
			if err != nil {
				t.Fatal(err)
			}
			_ = pr.Body.Close()
			if pr.StatusCode != http.StatusAccepted {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The SDK's certificate credential, public cloud and instance discovery on, through the
	// proxy: its assertion names the public token endpoint, and that is the audience accepted.
	pemBytes, err := os.ReadFile(s.ClientCertificatePath)
	if err != nil {
		t.Fatal(err)
	}
	certs, key, err := azidentity.ParseCertificates(pemBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	certCred, err := azidentity.NewClientCertificateCredential(s.TenantID, s.ClientID, certs, key,
		&azidentity.ClientCertificateCredentialOptions{ClientOptions: azcore.ClientOptions{Transport: pub}})
	if err != nil {
		t.Fatal(err)
	}
	if claims := verify(t, e.c, cloudtest.Token(t, certCred, armScope)); claims.Issuer != login+"/"+s.TenantID+"/v2.0" || claims.ObjectID != s.ObjectID {
		t.Errorf("certificate credential through the proxy: iss %s oid %s", claims.Issuer, claims.ObjectID)
	}
	// A vault name no vault has is refused at the proxy, like any other host.
	if res, err := pub.Get("https://nosuchvault.vault.azure.net/secrets?api-version=7.4"); err == nil {
		_ = res.Body.Close()
		t.Errorf("a vault that does not exist was reached: %d", res.StatusCode)
	}
	if !strings.Contains(e.logs.String(), `"msg":"Proxy refused CONNECT","service":"proxy","host":"nosuchvault.vault.azure.net"`) {
		t.Error("no log line for the refused vault name")
	}
	// ARM's challenge names the public authority under the public name.
	res, err := pub.Get("https://management.azure.com/subscriptions/" + s.SubscriptionID + "/resourcegroups?api-version=2021-04-01")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if h := res.Header.Get("Www-Authenticate"); res.StatusCode != 401 || !strings.Contains(h, `authorization_uri="`+login+"/"+s.TenantID+`"`) {
		t.Errorf("ARM challenge under its public name: %d %q", res.StatusCode, h)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestProxyPortTaken: a proxy address another process holds fails the start with an error
// naming it, and leaves nothing behind: the cloud's own port is free again and the same data
// directory starts at once with another proxy port.
func TestProxyPortTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cloudAddr := free.Addr().String()
	_ = free.Close()
	dir := t.TempDir()
	_, err = cloud.Start(t.Context(), cloud.Options{Addr: cloudAddr, DataDir: dir, ProxyAddr: held.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), held.Addr().String()) {
		t.Fatalf("start with the proxy port taken: %v, want an error naming %s", err, held.Addr())
	}
	c, err := cloud.Start(t.Context(), cloud.Options{Addr: cloudAddr, DataDir: dir, ProxyAddr: "0"})
	if err != nil {
		t.Fatalf("start again: %v", err)
	}
	_ = c.Close()
}

// TestProxyServedOnASecondAddress: the proxy served on another address (as `up` serves it on
// the node's address for pods) answers Azure's public names there too, with the cloud's CA; a
// taken address is named in the error.
func TestProxyServedOnASecondAddress(t *testing.T) {
	e := startProxied(t)
	second, err := e.c.ServeProxyOn("127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	if second == e.c.Settings().ProxyURL || !strings.HasPrefix(second, "http://127.0.0.2:") {
		t.Fatalf("second proxy URL %q (first %q)", second, e.c.Settings().ProxyURL)
	}
	proxyURL, _ := url.Parse(second)
	tr := e.c.Transport()
	tr.Proxy = http.ProxyURL(proxyURL)
	res, err := (&http.Client{Transport: tr}).Get("https://login.microsoftonline.com/" + e.c.Settings().TenantID + "/v2.0/.well-known/openid-configuration")
	if err != nil {
		t.Fatalf("discovery through the second address: %v", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("discovery through the second address: %s", res.Status)
	}
	if _, err := e.c.ServeProxyOn(proxyURL.Host); err == nil || !strings.Contains(err.Error(), proxyURL.Host) {
		t.Errorf("serving on a taken address: %v, want an error naming %s", err, proxyURL.Host)
	}
}
