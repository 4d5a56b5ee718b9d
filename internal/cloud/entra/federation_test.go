package entra

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// fakeIssuer serves discovery and JWKS; its answers are set per test.
type fakeIssuer struct {
	srv       *httptest.Server
	issuer    string // "" = the server's URL
	jwksURI   string // "" = the server's /jwks
	jwks      func() any
	discovery atomic.Int32
	keysGets  atomic.Int32
}

func newFakeIssuer(t *testing.T) *fakeIssuer {
	t.Helper()
	f := &fakeIssuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		f.discovery.Add(1)
		iss, uri := f.issuer, f.jwksURI
		if iss == "" {
			iss = f.srv.URL
		}
		if uri == "" {
			uri = f.srv.URL + "/jwks"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": uri})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		f.keysGets.Add(1)
		_ = json.NewEncoder(w).Encode(f.jwks())
	})
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func rsaSet(t *testing.T, kids ...string) jose.JSONWebKeySet {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, kid := range kids {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Use: "sig", Algorithm: "RS256"})
	}
	return set
}

func TestIssuerKeysCacheAndRefresh(t *testing.T) {
	f := newFakeIssuer(t)
	set := rsaSet(t, "a")
	f.jwks = func() any { return set }
	now := time.Unix(1_800_000_000, 0)
	k := newIssuerKeys(f.srv.Client(), func() time.Time { return now })
	ctx := t.Context()
	for range 5 {
		if _, err := k.key(ctx, f.srv.URL, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.keysGets.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times for five lookups, want 1", n)
	}
	// An unknown kid right after a fetch does not refetch (no amplification by forged kids)...
	if _, err := k.key(ctx, f.srv.URL, "b"); !errors.Is(err, errKeyNotFound) {
		t.Fatalf("unknown kid: %v", err)
	}
	if n := f.keysGets.Load(); n != 1 {
		t.Fatalf("an unknown kid refetched immediately (%d fetches)", n)
	}
	// ...but does once the minimum interval has passed: the issuer may have rotated.
	set = rsaSet(t, "a", "b")
	now = now.Add(issuerMinRefresh + time.Second)
	if _, err := k.key(ctx, f.srv.URL, "b"); err != nil {
		t.Fatalf("rotated kid: %v", err)
	}
	// An old cache is refreshed.
	now = now.Add(issuerCacheTTL + time.Second)
	if _, err := k.key(ctx, f.srv.URL, "a"); err != nil {
		t.Fatal(err)
	}
	if n := f.keysGets.Load(); n != 3 {
		t.Fatalf("JWKS fetched %d times, want 3", n)
	}
}

func TestIssuerKeysRejectsBadDocuments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fakeIssuer)
		want  string
	}{
		{"issuer mismatch", func(f *fakeIssuer) { f.issuer = "https://elsewhere.example" }, "names issuer"},
		{"plain http jwks_uri", func(f *fakeIssuer) { f.jwksURI = strings.Replace(f.srv.URL, "https", "http", 1) + "/jwks" }, "not an https URL"},
		{"oversized JWKS", func(f *fakeIssuer) {
			f.jwks = func() any { return map[string]string{"pad": strings.Repeat("x", issuerDocLimit+1)} }
		}, "larger than"},
		{"not JSON", func(f *fakeIssuer) { f.jwks = func() any { return "not a key set" } }, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeIssuer(t)
			set := rsaSet(t, "a")
			f.jwks = func() any { return set }
			tc.setup(f)
			k := newIssuerKeys(f.srv.Client(), time.Now)
			_, err := k.key(t.Context(), f.srv.URL, "a")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	k := newIssuerKeys(http.DefaultClient, time.Now)
	if _, err := k.key(t.Context(), "http://127.0.0.1:1", "a"); err == nil || !strings.Contains(err.Error(), "not an https URL") {
		t.Fatalf("plain http issuer: %v", err)
	}
}
