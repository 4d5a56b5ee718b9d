package hcpcredentials_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/cerulean/cerulean/internal/azure/identitycreds"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/admin"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// TestCredentialsFileAsWrittenBehindTheProxy: with the cloud serving Azure's public names
// through its proxy, the credentials it issues — from the managed-identity data plane the
// manager asks at the cloud's own address, and from the admin route — name Azure's public
// authority, as Azure writes them. A component that reaches nothing but the proxy (as a pod on
// the node: loopback is not its own) authenticates with the file as written, with no option
// but its transport, and gets the identity's tokens; the cloud's loopback authority is out of
// its reach, so a file naming that one (what the cloud wrote before) gets it no token.
func TestCredentialsFileAsWrittenBehindTheProxy(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{ProxyAddr: "0"})
	s := c.Settings()
	ctx := t.Context()
	mi, err := c.Entra().Directory.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "managed-azure-cpo",
		ResourceID: "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-hcp/providers/Microsoft.ManagedIdentity/userAssignedIdentities/cpo"})
	if err != nil {
		t.Fatal(err)
	}
	owner := cloudtest.OwnerCred(t, c)

	// The manager's way: the data plane at the cloud's address.
	dp, err := identitycreds.New(identitycreds.Options{URL: c.IdentityURL(), Credential: owner,
		Scope: cloud.ResourceManagerAudience + ".default", ClientOptions: cloudtest.NoRetry(c)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dp.Get(ctx, mi.ResourceID)
	if err != nil {
		t.Fatalf("credentials from the data plane: %v", err)
	}
	fromDataPlane, err := json.Marshal(got.File)
	if err != nil {
		t.Fatal(err)
	}
	// The admin route's way.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+admin.Prefix+"/principals/"+mi.ClientID+"/credentials", nil)
	req.Header.Set("Authorization", "Bearer "+cloudtest.Token(t, owner, cloud.ResourceManagerAudience+".default"))
	resp, err := (&http.Client{Transport: c.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	fromAdmin, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("credentials from the admin route: %d %s", resp.StatusCode, fromAdmin)
	}

	const public = "https://login.microsoftonline.com/"
	if s.CredentialsAuthorityHost != public {
		t.Errorf("Settings.CredentialsAuthorityHost = %q, want %q", s.CredentialsAuthorityHost, public)
	}
	// The component: its only way out is the proxy (HTTPS_PROXY with no NO_PROXY), its CA the
	// cloud's; no authority or cloud configuration.
	proxyURL, err := url.Parse(s.ProxyURL)
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Transport()
	tr.Proxy = http.ProxyURL(proxyURL)
	podLike := azcore.ClientOptions{Transport: &http.Client{Transport: tr}, Retry: policy.RetryOptions{MaxRetries: -1}}
	scope := policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}}
	for name, body := range map[string][]byte{"data plane": fromDataPlane, "admin route": fromAdmin} {
		f, _, _, err := hcpcredentials.Parse(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.AuthenticationEndpoint != public {
			t.Errorf("%s: authentication_endpoint %q, want Azure's %q", name, f.AuthenticationEndpoint, public)
		}
		path := filepath.Join(t.TempDir(), "credentials.json")
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		cred, err := hcpcredentials.New(ctx, hcpcredentials.Options{Path: path, ClientOptions: podLike})
		if err != nil {
			t.Fatal(err)
		}
		if cur := cred.Current(); cur.AuthorityHost != public {
			t.Errorf("%s: Current().AuthorityHost = %q, want %q", name, cur.AuthorityHost, public)
		}
		tok, err := cred.GetToken(ctx, scope)
		if err != nil {
			t.Fatalf("%s: a component behind the proxy got no token with the file as written: %v", name, err)
		}
		claims, err := c.Entra().Verify(ctx, tok.Token, func(string) bool { return true })
		if err != nil || claims.AppID != mi.ClientID || claims.Issuer != "https://login.microsoftonline.com/"+s.TenantID+"/v2.0" {
			t.Fatalf("%s: claims %+v %v", name, claims, err)
		}

		// The same file naming the loopback authority: out of the component's reach.
		f.AuthenticationEndpoint = s.AuthorityHost
		loopback, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, loopback, 0o600); err != nil {
			t.Fatal(err)
		}
		stale, err := hcpcredentials.New(ctx, hcpcredentials.Options{Path: path, ClientOptions: podLike})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stale.GetToken(ctx, scope); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("%s: a component behind the proxy reached the loopback authority: %v (want the proxy's 403)", name, err)
		}
	}
}
