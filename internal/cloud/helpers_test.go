package cloud_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// clock is a settable clock; it starts at the real time so that assertions the SDK makes with
// its own clock are valid until a test moves it.
type clock = cloudtest.Clock

func newClock() *clock { return cloudtest.NewClock() }

type env struct {
	c     *cloud.Cloud
	clock *clock
	logs  *cloudtest.SyncBuffer
	dir   string
}

func start(t *testing.T, dir string, trust ...[]byte) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e := &env{clock: newClock(), logs: &cloudtest.SyncBuffer{}, dir: dir}
	e.c = startWith(t, dir, e.clock, e.logs, trust...)
	return e
}

func startWith(t *testing.T, dir string, clk *clock, logs *cloudtest.SyncBuffer, trust ...[]byte) *cloud.Cloud {
	t.Helper()
	return cloudtest.Start(t, cloud.Options{DataDir: dir, TrustCAs: trust, Clock: clk.Now, Logger: cloudtest.DebugLogger(logs)})
}

// post sends a form to the tenant's token endpoint and decodes the JSON answer.
func (e *env) post(t *testing.T, tenant string, form url.Values) (int, map[string]any) {
	t.Helper()
	return e.do(t, http.MethodPost, e.c.Settings().URL+"/"+tenant+"/oauth2/v2.0/token",
		"application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
}

func (e *env) do(t *testing.T, method, u, contentType string, body *strings.Reader) (int, map[string]any) {
	t.Helper()
	var req *http.Request
	var err error
	if body == nil {
		req, err = http.NewRequestWithContext(t.Context(), method, u, nil)
	} else {
		req, err = http.NewRequestWithContext(t.Context(), method, u, body)
	}
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: decode %d answer: %v", method, u, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// secretForm is a valid secret request for the bootstrap principal.
func (e *env) secretForm() url.Values {
	s := e.c.Settings()
	return url.Values{
		"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret},
		"scope": {"https://management.core.windows.net//.default openid offline_access profile"},
	}
}

// wantEntraError checks Entra's error shape and code.
func wantEntraError(t *testing.T, status int, body map[string]any, wantStatus, code int) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status = %d, want %d (body %v)", status, wantStatus, body)
	}
	codes, _ := body["error_codes"].([]any)
	if len(codes) != 1 || int(codes[0].(float64)) != code {
		t.Errorf("error_codes = %v, want [%d]", body["error_codes"], code)
	}
	desc, _ := body["error_description"].(string)
	if !strings.HasPrefix(desc, "AADSTS"+itoa(code)+": ") || !strings.Contains(desc, "Trace ID: ") {
		t.Errorf("error_description = %q", desc)
	}
	for _, k := range []string{"error", "timestamp", "trace_id", "correlation_id"} {
		if s, _ := body[k].(string); s == "" {
			t.Errorf("missing %s in %v", k, body)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// issuer is a test OIDC issuer over HTTPS on 127.0.0.1, like a Kubernetes service-account issuer.
type issuer struct {
	srv     *httptest.Server
	key     *rsa.PrivateKey
	kid     string
	fetches atomic.Int32
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "issuer-key-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/openid/v1/jwks",
			"response_types_supported": []string{"id_token"}, "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /openid/v1/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: is.kid, Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// caPEM is the PEM of the issuer's certificate, for the cloud's TrustCAs.
func (is *issuer) caPEM() []byte {
	var b bytes.Buffer
	_ = pemEncode(&b, is.srv.Certificate().Raw)
	return b.Bytes()
}

// token makes a service-account-like token.
func (is *issuer) token(t *testing.T, sub, aud string, iat time.Time, mutate ...func(*jwt.Token)) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": is.srv.URL, "sub": sub, "aud": []string{aud},
		"iat": iat.Unix(), "nbf": iat.Unix(), "exp": iat.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = is.kid
	key := any(is.key)
	for _, m := range mutate {
		m(tok)
	}
	if k, ok := tok.Header["_key"]; ok {
		key = k
		delete(tok.Header, "_key")
	}
	raw, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

var _ = context.Background
