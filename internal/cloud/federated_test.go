package cloud_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud/entra"
)

const exchangeAudience = "api://AzureADTokenExchange"

// TestFederatedCredential exchanges a test issuer's tokens through ClientAssertionCredential, as a
// workload-identity pod does.
func TestFederatedCredential(t *testing.T) {
	is := newIssuer(t)
	e := start(t, "", is.caPEM())
	s := e.c.Settings()
	dir := e.c.Entra().Directory
	mirid := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app"
	mi, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "app", ResourceID: mirid})
	if err != nil {
		t.Fatal(err)
	}
	const subject = "system:serviceaccount:default:app"
	if _, err := dir.PutFederatedCredential(t.Context(), s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "k8s", Issuer: is.srv.URL, Subject: subject, Audiences: []string{exchangeAudience},
	}); err != nil {
		t.Fatal(err)
	}

	exchange := func(t *testing.T, assertion string) error {
		t.Helper()
		cred, err := azidentity.NewClientAssertionCredential(s.TenantID, mi.ClientID,
			func(context.Context) (string, error) { return assertion, nil },
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := getToken(t, cred, armScope)
		if err != nil {
			return err
		}
		claims := verify(t, e.c, tok.Token)
		if claims.ObjectID != mi.ObjectID || claims.AppID != mi.ClientID || claims.MIResource != mirid || claims.TenantID != s.TenantID {
			t.Errorf("claims = %+v", claims)
		}
		return nil
	}
	wantErr := func(t *testing.T, err error, parts ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("exchange succeeded, want %v", parts)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q lacks %q", err, p)
			}
		}
	}

	now := e.clock.Now()
	for range 3 {
		if err := exchange(t, is.token(t, subject, exchangeAudience, now)); err != nil {
			t.Fatalf("exchange: %v", err)
		}
	}
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("issuer discovery fetched %d times, want 1 (cached)", n)
	}

	commits := e.c.Store().Commits()
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("wrong subject", func(t *testing.T) {
		wantErr(t, exchange(t, is.token(t, "system:serviceaccount:default:other", exchangeAudience, now)),
			"AADSTS700213", is.srv.URL, "system:serviceaccount:default:other", exchangeAudience)
	})
	t.Run("wrong audience", func(t *testing.T) {
		wantErr(t, exchange(t, is.token(t, subject, "api://Other", now)), "AADSTS700213", "api://Other")
	})
	t.Run("subject differs in case", func(t *testing.T) {
		wantErr(t, exchange(t, is.token(t, strings.ToUpper(subject), exchangeAudience, now)), "AADSTS700213")
	})
	t.Run("untrusted issuer", func(t *testing.T) {
		tok := is.token(t, subject, exchangeAudience, now, func(tk *jwt.Token) { tk.Claims.(jwt.MapClaims)["iss"] = "https://127.0.0.1:1/elsewhere" })
		wantErr(t, exchange(t, tok), "AADSTS70021", "https://127.0.0.1:1/elsewhere", subject, exchangeAudience)
	})
	t.Run("wrong key under the right kid", func(t *testing.T) {
		tok := is.token(t, subject, exchangeAudience, now, func(tk *jwt.Token) { tk.Header["_key"] = otherKey })
		wantErr(t, exchange(t, tok), "AADSTS700027")
	})
	t.Run("unknown kid", func(t *testing.T) {
		tok := is.token(t, subject, exchangeAudience, now, func(tk *jwt.Token) { tk.Header["kid"] = "nope" })
		wantErr(t, exchange(t, tok), "AADSTS700027")
	})
	t.Run("alg none", func(t *testing.T) {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": is.srv.URL, "sub": subject, "aud": exchangeAudience,
			"exp": now.Add(time.Hour).Unix()})
		tok.Header["kid"] = is.kid
		raw, _ := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		wantErr(t, exchange(t, raw), "AADSTS700027")
	})
	t.Run("expired", func(t *testing.T) {
		wantErr(t, exchange(t, is.token(t, subject, exchangeAudience, now.Add(-2*time.Hour))), "AADSTS700024")
	})
	t.Run("unknown identity", func(t *testing.T) {
		status, body := e.post(t, s.TenantID, url.Values{"grant_type": {"client_credentials"}, "client_id": {"11111111-1111-1111-1111-111111111111"},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
			"client_assertion":      {is.token(t, subject, exchangeAudience, now)}, "scope": {armScope}})
		wantEntraError(t, status, body, http.StatusBadRequest, 700016)
	})
	if got := e.c.Store().Commits(); got != commits {
		t.Errorf("rejected exchanges wrote to the store (%d commits)", got-commits)
	}

	// Expiry through the injected clock: the issuer's token lives an hour.
	t.Run("expired by the cloud's clock", func(t *testing.T) {
		tok := is.token(t, subject, exchangeAudience, now)
		e.clock.Advance(2 * time.Hour)
		wantErr(t, exchange(t, tok), "AADSTS700024")
		if err := exchange(t, is.token(t, subject, exchangeAudience, e.clock.Now())); err != nil {
			t.Fatalf("fresh token after the clock moved: %v", err)
		}
	})
}

// TestFederatedIssuerUnreachable: an issuer whose documents cannot be fetched is Entra's
// AADSTS50166, and the cloud keeps serving.
func TestFederatedIssuerUnreachable(t *testing.T) {
	is := newIssuer(t)
	e := start(t, "") // does not trust the issuer's CA
	s := e.c.Settings()
	dir := e.c.Entra().Directory
	mi, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.PutFederatedCredential(t.Context(), s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "k8s", Issuer: is.srv.URL, Subject: "s", Audiences: []string{exchangeAudience},
	}); err != nil {
		t.Fatal(err)
	}
	status, body := e.post(t, s.TenantID, url.Values{"grant_type": {"client_credentials"}, "client_id": {mi.ClientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {is.token(t, "s", exchangeAudience, time.Now())}, "scope": {armScope}})
	wantEntraError(t, status, body, http.StatusBadRequest, 50166)
	if status, body := e.post(t, s.TenantID, e.secretForm()); status != http.StatusOK {
		t.Fatalf("after a failed fetch: %d %v", status, body)
	}
}
