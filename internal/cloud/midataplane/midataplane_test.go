package midataplane_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"

	"github.com/cerulean/cerulean/internal/azure/identitycreds"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/midataplane"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

func client(t *testing.T, c *cloud.Cloud, cred azcore.TokenCredential) *identitycreds.Client {
	t.Helper()
	cl, err := identitycreds.New(identitycreds.Options{URL: c.IdentityURL(), Credential: cred,
		Scope: cloud.ResourceManagerAudience + ".default", ClientOptions: cloudtest.NoRetry(c)})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestIdentityCredentials: a caller allowed to assign a user-assigned identity (Owner; a
// principal granted Managed Identity Operator on it) gets its credentials from the data plane
// with the real request shape; a client-certificate credential built from them (sending the
// chain) gets the identity's tokens; a caller without the grant gets 403 and no certificate is
// registered; renewals drop the identity's expired certificates.
func TestIdentityCredentials(t *testing.T) {
	clock := cloudtest.NewClock()
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM(), Clock: clock.Now})
	s := c.Settings()
	ctx := t.Context()
	owner := cloudtest.OwnerCred(t, c)
	cloudtest.CreateGroup(t, c, owner, cloudtest.ARMOptions(c), "eastus", "rg-hcp")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, cloudtest.ARMOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	mi, err := ids.CreateOrUpdate(ctx, "rg-hcp", "cpo", armmsi.Identity{Location: to.Ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}

	got, err := client(t, c, owner).Get(ctx, *mi.ID)
	if err != nil {
		t.Fatalf("credentials as Owner: %v", err)
	}
	if got.ClientID != *mi.Properties.ClientID || got.ObjectID != *mi.Properties.PrincipalID || got.TenantID != s.TenantID ||
		got.AuthenticationEndpoint != s.AuthorityHost || !strings.EqualFold(got.ResourceID, *mi.ID) || got.ClientSecretURL != c.IdentityURL() ||
		got.NotAfter.Sub(got.NotBefore) != midataplane.DefaultValidity || !got.RenewAfter.Equal(got.NotBefore.Add(midataplane.DefaultValidity/2)) ||
		!got.CannotRenewAfter.After(got.RenewAfter) || !got.NotAfter.After(got.CannotRenewAfter) {
		t.Errorf("credentials %+v", got.File)
	}
	_, certs, key, err := hcpcredentials.Parse(mustJSON(t, got.File))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := azidentity.NewClientCertificateCredential(s.TenantID, got.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
		ClientOptions: cloudtest.NoRetry(c), DisableInstanceDiscovery: true, SendCertificateChain: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cert.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}})
	if err != nil {
		t.Fatalf("token with the issued certificate: %v", err)
	}
	claims, err := c.Entra().Verify(ctx, tok.Token, func(string) bool { return true })
	if err != nil || claims.AppID != got.ClientID || !strings.EqualFold(claims.MIResource, *mi.ID) {
		t.Fatalf("claims %+v %v", claims, err)
	}

	// A principal without a grant: 403, and nothing registered on the identity.
	sp, spCred := cloudtest.NewPrincipal(t, c, "rp")
	before := certCount(t, c, got.ClientID)
	_, err = client(t, c, spCred).Get(ctx, *mi.ID)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	if n := certCount(t, c, got.ClientID); n != before {
		t.Errorf("a refused request registered a certificate: %d → %d", before, n)
	}
	// Managed Identity Operator on the identity is enough.
	name := "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"
	now := time.Now().UTC()
	if err := c.ARM().Authz().Ensure(ctx, authz.Assignment{ID: authz.AssignmentID(*mi.ID, name), Name: name, Scope: *mi.ID,
		RoleDefinitionID: authz.ManagedIdentityOperator, PrincipalID: sp.ObjectID, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := client(t, c, spCred).Get(ctx, *mi.ID); err != nil {
		t.Fatalf("credentials as Managed Identity Operator: %v", err)
	}
	// Unknown identity (the caller could assign it if it existed): 404.
	_, err = client(t, c, owner).Get(ctx, strings.Replace(*mi.ID, "/cpo", "/nobody", 1))
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")

	// Renewal after the first credentials expired: they are dropped from the principal.
	if n := certCount(t, c, got.ClientID); n != 2 {
		t.Fatalf("%d certificates registered, want 2", n)
	}
	clock.Advance(midataplane.DefaultValidity + time.Hour)
	// A new credential: the cached token expired on the cloud's clock.
	if _, err := client(t, c, cloudtest.OwnerCred(t, c)).Get(ctx, *mi.ID); err != nil {
		t.Fatal(err)
	}
	if n := certCount(t, c, got.ClientID); n != 1 {
		t.Errorf("%d certificates registered after the others expired, want 1", n)
	}
}

// TestIdentityCredentialsBadRequests: the data plane's answers to malformed requests.
func TestIdentityCredentialsBadRequests(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{})
	s := c.Settings()
	token := cloudtest.Token(t, cloudtest.OwnerCred(t, c), cloud.ResourceManagerAudience+".default")
	vaultToken := cloudtest.Token(t, cloudtest.OwnerCred(t, c), "https://vault.azure.net/.default")
	mi := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/x"
	for name, tc := range map[string]struct {
		query, token, body string
		status             int
		code               string
	}{
		"no api-version":  {"", token, `{"identityIds":["` + mi + `"]}`, 400, "MissingApiVersionParameter"},
		"old api-version": {"?api-version=2023-01-01", token, `{"identityIds":["` + mi + `"]}`, 400, "InvalidApiVersionParameter"},
		"no token":        {"?api-version=2024-01-01", "", `{"identityIds":["` + mi + `"]}`, 401, "AuthenticationFailed"},
		"vault token":     {"?api-version=2024-01-01", vaultToken, `{"identityIds":["` + mi + `"]}`, 401, "InvalidAuthenticationToken"},
		"not json":        {"?api-version=2024-01-01", token, `{`, 400, "InvalidRequestContent"},
		"no identities":   {"?api-version=2024-01-01", token, `{"identityIds":[]}`, 400, "InvalidRequestContent"},
		"not an identity": {"?api-version=2024-01-01", token, `{"identityIds":["/subscriptions/x/resourceGroups/rg"]}`, 400, "InvalidRequestContent"},
		"delegated":       {"?api-version=2024-01-01", token, `{"identityIds":["` + mi + `"],"delegatedResources":["r"]}`, 400, "InvalidRequestContent"},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.IdentityURL()+tc.query, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := (&http.Client{Transport: c.Transport()}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, b, tc.status, tc.code)
			}
			if tc.status == 401 && !strings.Contains(resp.Header.Get("Www-Authenticate"), "Bearer authorization=") {
				t.Errorf("401 without a challenge: %q", resp.Header.Get("Www-Authenticate"))
			}
		})
	}
	if _, err := identitycreds.New(identitycreds.Options{URL: "http://example/", Credential: cloudtest.OwnerCred(t, c), Scope: "x"}); err == nil {
		t.Error("an http identity URL was accepted")
	}
}

func certCount(t *testing.T, c *cloud.Cloud, clientID string) int {
	t.Helper()
	p, err := c.Entra().Directory.Principal(t.Context(), c.Settings().TenantID, clientID)
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Certificates)
}

func mustJSON(t *testing.T, f hcpcredentials.File) []byte {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
