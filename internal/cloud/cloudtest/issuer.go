package cloudtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// ExchangeAudience is the audience workload identity federation's tokens carry.
const ExchangeAudience = "api://AzureADTokenExchange"

// Issuer is a test OIDC issuer over HTTPS on 127.0.0.1, like a Kubernetes service-account
// issuer: a federated credential naming its URL trusts the tokens it signs.
type Issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

// NewIssuer serves the issuer's discovery document and keys until the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/openid/v1/jwks",
			"response_types_supported": []string{"id_token"}, "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /openid/v1/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// URL is the issuer's URL, its tokens' iss.
func (is *Issuer) URL() string { return is.srv.URL }

// CAPEM is the issuer's certificate, for the cloud's TrustCAs.
func (is *Issuer) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw})
}

// Token signs a service-account-like token for sub with ExchangeAudience, valid for an hour.
func (is *Issuer) Token(t testing.TB, sub string) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": is.srv.URL, "sub": sub, "aud": []string{ExchangeAudience},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = "k1"
	raw, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
