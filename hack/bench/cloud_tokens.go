package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

func init() {
	register(section{title: "Local cloud: token issuance", run: benchCloudTokens})
}

// benchCloudTokens measures the token endpoint with a client secret and with a federated
// assertion from an OIDC issuer over HTTPS on 127.0.0.1 (its keys cached after the first
// request), at 1, 8 and 64 concurrent clients. Each request is a raw POST: the SDK would cache
// the token and measure nothing.
func benchCloudTokens(ctx context.Context, env benchEnv) ([]row, error) {
	iss, err := newBenchIssuer()
	if err != nil {
		return nil, err
	}
	defer iss.srv.Close()
	c, err := startCloud(ctx, env, "cloud-tokens", cloud.Options{
		TrustCAs: [][]byte{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: iss.srv.Certificate().Raw})}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	mi, err := c.Entra().Directory.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "bench"})
	if err != nil {
		return nil, err
	}
	const sub, aud = "system:serviceaccount:bench:bench", "api://AzureADTokenExchange"
	if _, err := c.Entra().Directory.PutFederatedCredential(ctx, s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "bench", Issuer: iss.srv.URL, Subject: sub, Audiences: []string{aud}}); err != nil {
		return nil, err
	}
	assertion, err := iss.token(sub, aud)
	if err != nil {
		return nil, err
	}
	scope := "https://management.core.windows.net//.default"
	secretForm := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret}, "scope": {scope}}.Encode()
	fedForm := url.Values{"grant_type": {"client_credentials"}, "client_id": {mi.ClientID}, "scope": {scope},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion}}.Encode()

	hc, tr := loadClient(c)
	defer tr.CloseIdleConnections()
	tokenURL := s.URL + "/" + s.TenantID + "/oauth2/v2.0/token"
	post := func(form string) func(context.Context) error {
		return func(ctx context.Context) error {
			status, err := send(ctx, hc, http.MethodPost, tokenURL, form, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("token endpoint answered %d", status)
			}
			return nil
		}
	}
	// Warm up: connections, the issuer's keys in the cache.
	for _, f := range []string{secretForm, fedForm} {
		if err := post(f)(ctx); err != nil {
			return nil, fmt.Errorf("warm up: %w", err)
		}
	}
	var rows []row
	for _, conc := range []int{1, 8, 64} {
		total := 300 * conc
		if total > 3000 {
			total = 3000
		}
		sec := benchutil.Load(ctx, conc, total, 20*time.Second, post(secretForm))
		fed := benchutil.Load(ctx, conc, total, 20*time.Second, post(fedForm))
		rows = append(rows,
			row{benchmark: fmt.Sprintf("client secret, %d concurrent", conc), result: sec.String()},
			row{benchmark: fmt.Sprintf("federated assertion, %d concurrent", conc), result: fed.String(), vsBaseline: ratio(fed.RPS(), sec.RPS()) + " of secret rps"},
		)
	}
	return rows, nil
}

// benchIssuer is an OIDC issuer over HTTPS, like a Kubernetes service-account issuer.
type benchIssuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newBenchIssuer() (*benchIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	b := &benchIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": b.srv.URL, "jwks_uri": b.srv.URL + "/openid/v1/jwks"})
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "RS256", Use: "sig"}}})
	})
	b.srv = httptest.NewTLSServer(mux)
	return b, nil
}

func (b *benchIssuer) token(sub, aud string) (string, error) {
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": b.srv.URL, "sub": sub, "aud": []string{aud},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	tok.Header["kid"] = "k"
	return tok.SignedString(b.key)
}
