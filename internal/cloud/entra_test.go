package cloud_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // x5t
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

const armScope = "https://management.core.windows.net//.default"

func getToken(t *testing.T, cred azcore.TokenCredential, scope string) (azcore.AccessToken, error) {
	t.Helper()
	return cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{scope}})
}

func verify(t *testing.T, c *cloud.Cloud, raw string) *entra.AccessClaims {
	t.Helper()
	claims, err := c.Entra().Verify(t.Context(), raw, func(aud string) bool { return aud == cloud.ResourceManagerAudience })
	if err != nil {
		t.Fatalf("verify access token: %v", err)
	}
	return claims
}

func secretCred(t *testing.T, c *cloud.Cloud, tenant, client, secret string) *azidentity.ClientSecretCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(tenant, client, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func bootstrapKey(t *testing.T, s cloud.Settings) ([]*x509.Certificate, crypto.PrivateKey) {
	t.Helper()
	pemBytes, err := os.ReadFile(s.ClientCertificatePath)
	if err != nil {
		t.Fatal(err)
	}
	certs, key, err := azidentity.ParseCertificates(pemBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	return certs, key
}

func TestClientSecretCredential(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	tok, err := getToken(t, secretCred(t, e.c, s.TenantID, s.ClientID, s.ClientSecret), armScope)
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	claims := verify(t, e.c, tok.Token)
	if claims.ObjectID != s.ObjectID || claims.AppID != s.ClientID || claims.AZP != s.ClientID || claims.TenantID != s.TenantID ||
		claims.IDType != "app" || claims.Issuer != s.URL+"/"+s.TenantID+"/v2.0" || claims.MIResource != "" {
		t.Errorf("claims = %+v", claims)
	}
	if life := claims.ExpiresAt.Sub(claims.IssuedAt.Time); life < 55*time.Minute || life > 65*time.Minute {
		t.Errorf("token lifetime = %s, want about an hour", life)
	}
	parsed, _, err := jwt.NewParser().ParseUnverified(tok.Token, jwt.MapClaims{})
	if err != nil || parsed.Header["alg"] != "RS256" || parsed.Header["kid"] == "" {
		t.Errorf("header = %v (%v)", parsed.Header, err)
	}

	for _, tc := range []struct {
		name, tenant, client, secret, want string
	}{
		{"wrong secret", s.TenantID, s.ClientID, "not-the-secret", "AADSTS7000215"},
		{"unknown client", s.TenantID, "00000000-0000-0000-0000-000000000001", s.ClientSecret, "AADSTS700016"},
		{"unknown tenant", "00000000-0000-0000-0000-000000000002", s.ClientID, s.ClientSecret, "AADSTS90002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := getToken(t, secretCred(t, e.c, tc.tenant, tc.client, tc.secret), armScope)
			var afe *azidentity.AuthenticationFailedError
			if !errors.As(err, &afe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an authentication error with %s", err, tc.want)
			}
		})
	}
	t.Run("invalid scope", func(t *testing.T) {
		_, err := getToken(t, secretCred(t, e.c, s.TenantID, s.ClientID, s.ClientSecret), "https://management.core.windows.net/user_impersonation")
		if err == nil || !strings.Contains(err.Error(), "AADSTS70011") {
			t.Fatalf("got %v, want AADSTS70011", err)
		}
	})
}

func TestClientCertificateCredential(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	certs, key := bootstrapKey(t, s)
	for _, chain := range []bool{false, true} {
		cred, err := azidentity.NewClientCertificateCredential(s.TenantID, s.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
			ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true, SendCertificateChain: chain,
		})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := getToken(t, cred, "https://vault.azure.net/.default")
		if err != nil {
			t.Fatalf("get token (send chain %v): %v", chain, err)
		}
		claims, err := e.c.Entra().Verify(t.Context(), tok.Token, func(aud string) bool { return aud == "https://vault.azure.net" })
		if err != nil || claims.AppIDACR != "2" || claims.ObjectID != s.ObjectID {
			t.Fatalf("claims %+v, %v", claims, err)
		}
	}

	// A certificate not registered on the app.
	other, otherPEM := selfSigned(t)
	otherCerts, otherKey, err := azidentity.ParseCertificates(otherPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = other
	cred, err := azidentity.NewClientCertificateCredential(s.TenantID, s.ClientID, otherCerts, otherKey, &azidentity.ClientCertificateCredentialOptions{
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getToken(t, cred, armScope); err == nil || !strings.Contains(err.Error(), "AADSTS700027") {
		t.Fatalf("unregistered certificate: got %v, want AADSTS700027", err)
	}

	// Expiry through the injected clock: the SDK's assertion lives about ten minutes.
	e.clock.Advance(time.Hour)
	cred, _ = azidentity.NewClientCertificateCredential(s.TenantID, s.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if _, err := getToken(t, cred, armScope); err == nil || !strings.Contains(err.Error(), "AADSTS700024") {
		t.Fatalf("expired assertion: got %v, want AADSTS700024", err)
	}
}

func selfSigned(t *testing.T) (*x509.Certificate, []byte) {
	t.Helper()
	cert, p, err := pkiSelfSigned("other")
	if err != nil {
		t.Fatal(err)
	}
	return cert, p
}

// TestCertificateAssertionVariants posts hand-made assertions in every form clients use.
func TestCertificateAssertionVariants(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	certs, key := bootstrapKey(t, s)
	der := certs[0].Raw
	s1, s256 := sha1.Sum(der), sha256.Sum256(der) //nolint:gosec // x5t
	tokenURL := s.URL + "/" + s.TenantID + "/oauth2/v2.0/token"
	now := time.Now()
	wrongKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	type variant struct {
		name    string
		method  jwt.SigningMethod
		header  map[string]any
		claims  func(jwt.MapClaims)
		key     any
		status  int
		code    int
		rawForm func(string) string
	}
	std := base64.StdEncoding.EncodeToString(s256[:])
	ok := []variant{
		{name: "Go PS256 x5t#S256 std padded", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": std}},
		{name: "JS PS256 x5t#S256 base64url", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": base64.RawURLEncoding.EncodeToString(s256[:])}},
		{name: "std unpadded", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": strings.TrimRight(std, "=")}},
		{name: "Python RS256 x5t urlsafe padded", method: jwt.SigningMethodRS256, header: map[string]any{"x5t": base64.URLEncoding.EncodeToString(s1[:])}},
		{name: "RS256 x5t unpadded", method: jwt.SigningMethodRS256, header: map[string]any{"x5t": base64.RawURLEncoding.EncodeToString(s1[:])}},
		{name: "RS256 x5t hex", method: jwt.SigningMethodRS256, header: map[string]any{"x5t": hex.EncodeToString(s1[:])}},
		{name: "x5c only", method: jwt.SigningMethodRS256, header: map[string]any{"x5c": []string{base64.StdEncoding.EncodeToString(der)}}},
		{name: "v1 token endpoint audience", method: jwt.SigningMethodRS256, header: map[string]any{"x5t": base64.URLEncoding.EncodeToString(s1[:])},
			claims: func(c jwt.MapClaims) { c["aud"] = s.URL + "/" + s.TenantID + "/oauth2/token" }},
	}
	bad := []variant{
		{name: "alg none", method: jwt.SigningMethodNone, key: jwt.UnsafeAllowNoneSignatureType, header: map[string]any{"x5t#S256": std}, status: 401, code: 700027},
		{name: "HS256 with the certificate as secret", method: jwt.SigningMethodHS256, key: der, header: map[string]any{"x5t#S256": std}, status: 401, code: 700027},
		{name: "wrong key under the right thumbprint", method: jwt.SigningMethodPS256, key: wrongKey, header: map[string]any{"x5t#S256": std}, status: 401, code: 700027},
		{name: "wrong audience", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": std},
			claims: func(c jwt.MapClaims) {
				c["aud"] = "https://login.microsoftonline.com/" + s.TenantID + "/oauth2/v2.0/token"
			}, status: 401, code: 700027},
		{name: "expired", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": std},
			claims: func(c jwt.MapClaims) {
				c["exp"] = now.Add(-time.Hour).Unix()
				c["nbf"] = now.Add(-2 * time.Hour).Unix()
			}, status: 400, code: 700024},
		{name: "not yet valid", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": std},
			claims: func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix(); c["exp"] = now.Add(2 * time.Hour).Unix() }, status: 400, code: 700024},
		{name: "no exp", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": std},
			claims: func(c jwt.MapClaims) { delete(c, "exp") }, status: 400, code: 50027},
		{name: "unregistered thumbprint", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": base64.StdEncoding.EncodeToString(make([]byte, 32))}, status: 401, code: 700027},
		{name: "thumbprint of the wrong size", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": "AAAA"}, status: 400, code: 50027},
		{name: "garbage", rawForm: func(string) string { return "not.a.jwt" }, status: 400, code: 50027},
		{name: "truncated signature", method: jwt.SigningMethodPS256, header: map[string]any{"x5t#S256": std},
			rawForm: func(raw string) string { return raw[:len(raw)-10] }, status: 401, code: 700027},
	}
	build := func(v variant) string {
		if v.method == nil {
			return v.rawForm("")
		}
		claims := jwt.MapClaims{"iss": s.ClientID, "sub": s.ClientID, "aud": tokenURL, "jti": "j",
			"nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(10 * time.Minute).Unix()}
		if v.claims != nil {
			v.claims(claims)
		}
		tok := jwt.NewWithClaims(v.method, claims)
		for k, val := range v.header {
			tok.Header[k] = val
		}
		k := v.key
		if k == nil {
			k = key
		}
		raw, err := tok.SignedString(k)
		if err != nil {
			t.Fatalf("%s: sign: %v", v.name, err)
		}
		if v.rawForm != nil {
			raw = v.rawForm(raw)
		}
		return raw
	}
	form := func(assertion string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_info": {"1"},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
			"client_assertion":      {assertion}, "scope": {armScope}}
	}
	for _, v := range ok {
		t.Run(v.name, func(t *testing.T) {
			status, body := e.post(t, s.TenantID, form(build(v)))
			if status != http.StatusOK || body["access_token"] == nil || body["expires_in"] == nil {
				t.Fatalf("status %d, body %v", status, body)
			}
		})
	}
	commits := e.c.Store().Commits()
	for _, v := range bad {
		t.Run(v.name, func(t *testing.T) {
			status, body := e.post(t, s.TenantID, form(build(v)))
			wantEntraError(t, status, body, v.status, v.code)
		})
	}
	if got := e.c.Store().Commits(); got != commits {
		t.Errorf("rejected requests wrote to the store (%d commits)", got-commits)
	}
}

// pkiSelfSigned is pki.SelfSigned, wrapped for the tests.
var pkiSelfSigned = func(cn string) (*x509.Certificate, []byte, error) { return selfSignedCert(cn) }

var _ = context.Background
