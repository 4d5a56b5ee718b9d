package hcpcredentials_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/admin"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// TestIssuedCredentials: the local cloud issues a managed identity's credentials file (its
// admin API, as Azure's managed-identity data plane does for a hosted control plane), and a
// component authenticates with it as that identity.
func TestIssuedCredentials(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{})
	s := c.Settings()
	ctx := t.Context()
	mi, err := c.Entra().Directory.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "managed-azure-kms",
		ResourceID: "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kms"})
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := cloudtest.NewPrincipal(t, c, "not-an-identity")
	armToken := cloudtest.Token(t, cloudtest.OwnerCred(t, c), cloud.ResourceManagerAudience+".default")
	issue := func(clientID, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+admin.Prefix+"/principals/"+clientID+"/credentials", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+armToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := (&http.Client{Transport: c.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, body := issue(mi.ClientID, `{"validity":"720h"}`)
	if status != http.StatusCreated {
		t.Fatalf("issue: %d %s", status, body)
	}
	f, certs, _, err := hcpcredentials.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if f.ClientID != mi.ClientID || f.ObjectID != mi.ObjectID || f.TenantID != s.TenantID || f.AuthenticationEndpoint != s.AuthorityHost ||
		f.NotAfter.Sub(f.NotBefore) != 720*time.Hour || !f.RenewAfter.After(f.NotBefore) || !f.CannotRenewAfter.After(f.RenewAfter) || !f.NotAfter.After(f.CannotRenewAfter) {
		t.Errorf("credentials %+v", f)
	}
	if len(certs) != 2 || certs[0].Subject.CommonName != mi.ClientID || certs[1].Subject.CommonName != "Cerulean local cloud CA" {
		t.Errorf("chain: %d certificates", len(certs))
	}
	path := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	cred, err := hcpcredentials.New(ctx, hcpcredentials.Options{Path: path, ClientOptions: cloudtest.NoRetry(c)})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}})
	if err != nil {
		t.Fatalf("token with the issued credentials: %v", err)
	}
	claims, err := c.Entra().Verify(ctx, tok.Token, func(string) bool { return true })
	if err != nil || claims.AppID != mi.ClientID || claims.MIResource != mi.ResourceID {
		t.Fatalf("claims %+v %v", claims, err)
	}

	for name, tc := range map[string]struct {
		clientID, body string
		status         int
	}{
		"service principal": {sp.ClientID, "", http.StatusBadRequest},
		"unknown":           {"11111111-1111-1111-1111-111111111111", "", http.StatusNotFound},
		"bad validity":      {mi.ClientID, `{"validity":"10s"}`, http.StatusBadRequest},
	} {
		if status, body := issue(tc.clientID, tc.body); status != tc.status {
			t.Errorf("%s: %d %s, want %d", name, status, body, tc.status)
		}
	}
}
