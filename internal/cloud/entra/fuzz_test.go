package entra

import (
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// fuzzKey signs the seed assertions; generated once per process.
var fuzzKey = func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}()

func seedAssertion(method jwt.SigningMethod, header map[string]any, claims jwt.MapClaims, key any) string {
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	raw, err := tok.SignedString(key)
	if err != nil {
		panic(err)
	}
	return raw
}

// FuzzParseAssertion feeds arbitrary strings to the assertion parser and verifier: they must
// never panic, and nothing but a correctly signed RS256/PS256 token verifies.
func FuzzParseAssertion(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	claims := jwt.MapClaims{"iss": "c", "sub": "c", "aud": "https://h/t/oauth2/v2.0/token", "exp": now.Add(time.Hour).Unix(), "nbf": now.Unix()}
	good := seedAssertion(jwt.SigningMethodPS256, map[string]any{"x5t#S256": strings.Repeat("A", 43) + "="}, claims, fuzzKey)
	for _, s := range []string{
		good,
		seedAssertion(jwt.SigningMethodRS256, map[string]any{"x5t": strings.Repeat("_", 27)}, claims, fuzzKey),
		seedAssertion(jwt.SigningMethodRS256, map[string]any{"x5c": []string{"AAAA"}, "kid": "k"}, claims, fuzzKey),
		seedAssertion(jwt.SigningMethodNone, nil, claims, jwt.UnsafeAllowNoneSignatureType),
		seedAssertion(jwt.SigningMethodHS256, nil, claims, []byte("k")),
		"", ".", "..", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", good[:len(good)-5],
		"eyJhbGciOiJSUzI1NiIsIng1dCI6MX0.e30.AA", // x5t of the wrong type
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := parseAssertion(raw)
		if err != nil {
			if a != nil {
				t.Fatal("parse returned an assertion and an error")
			}
			return
		}
		_ = a.audience()
		claims, err := verifyAssertion(raw, &fuzzKey.PublicKey, certificateAlgs, func() time.Time { return now })
		if err == nil {
			if claims == nil || (a.Alg != "RS256" && a.Alg != "PS256") {
				t.Fatalf("verified an assertion with alg %q", a.Alg)
			}
			return
		}
		_ = assertionError(err, now)
	})
}

// FuzzParseTokenForm: the token form parser never panics, and whatever it accepts has at most one
// value per field and fits the body limit.
func FuzzParseTokenForm(f *testing.F) {
	for _, s := range []string{
		"grant_type=client_credentials&client_id=abc&client_secret=s&scope=https%3A%2F%2Fmanagement.core.windows.net%2F%2F.default",
		"grant_type=client_credentials&client_id=a&client_id=b",
		"client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=a.b.c",
		"%zz", "a=1;b=2", "&&&", "=", "scope=openid+offline_access+profile+x%2F.default",
		"claims=%7B%22access_token%22%3A%7B%22xms_cc%22%3A%7B%22values%22%3A%5B%22CP1%22%5D%7D%7D%7D",
	} {
		f.Add("application/x-www-form-urlencoded", []byte(s))
	}
	f.Add("application/x-www-form-urlencoded; charset=utf-8", []byte("grant_type=x"))
	f.Add("application/json", []byte("{}"))
	f.Add("", []byte(""))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req, ferr := parseTokenForm(contentType, body)
		if ferr != nil {
			if ferr.Status < 400 || ferr.Status >= 500 || ferr.Code == 0 {
				t.Fatalf("form error %+v is not a 4xx Entra error", ferr)
			}
			return
		}
		if len(body) > maxTokenBody {
			t.Fatal("accepted an oversized body")
		}
		if req.Scope != "" {
			if res, serr := resourceFromScope(req.Scope); serr == nil && res == "" {
				t.Fatal("empty resource accepted")
			}
		}
	})
}

func TestDecodeThumbprint(t *testing.T) {
	want := []byte{0xfb, 0xff, 0xfe, 0x01, 0x02, 0x03}
	for _, s := range []string{"+//+AQID", "-__-AQID", "+//+AQID==", "-__-AQID", "fbfffe010203"} {
		got, err := decodeThumbprint(s)
		if s == "fbfffe010203" {
			// Only 40- and 64-character strings are read as hex.
			continue
		}
		if err != nil || string(got) != string(want) {
			t.Errorf("decodeThumbprint(%q) = %x, %v", s, got, err)
		}
	}
}

func TestResourceFromScope(t *testing.T) {
	for scope, want := range map[string]string{
		"https://management.core.windows.net//.default":                  "https://management.core.windows.net/",
		"https://vault.azure.net/.default openid offline_access profile": "https://vault.azure.net",
		"api://AzureADTokenExchange/.default":                            "api://AzureADTokenExchange",
		"00000000-0000-0000-0000-000000000001/.default":                  "00000000-0000-0000-0000-000000000001",
		"":       "",
		"openid": "",
		"https://vault.azure.net/.default https://management.azure.com/.default": "",
		"https://vault.azure.net/user_impersonation":                             "",
	} {
		got, err := resourceFromScope(scope)
		if want == "" {
			if err == nil || err.Code != 70011 {
				t.Errorf("resourceFromScope(%q) = %q, %v; want AADSTS70011", scope, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("resourceFromScope(%q) = %q, %v; want %q", scope, got, err, want)
		}
	}
}
