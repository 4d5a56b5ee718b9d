package cloud_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// TestAdminAPIAuthorization: only an ARM token of the subscription's Owner manages principals.
func TestAdminAPIAuthorization(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	url := s.URL + "/_cerulean/admin/principals"
	token := func(clientID, secret, scope string) string {
		f := e.secretForm()
		f.Set("client_id", clientID)
		f.Set("client_secret", secret)
		f.Set("scope", scope)
		status, out := e.post(t, s.TenantID, f)
		if status != http.StatusOK {
			t.Fatalf("token: %d %v", status, out)
		}
		return out["access_token"].(string)
	}
	other, err := e.c.Entra().Directory.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	otherSecret, _, err := e.c.Entra().Directory.AddSecret(t.Context(), s.TenantID, other.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	call := func(bearer string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"displayName":"x"}`))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = jsonDecode(resp, &out)
		return resp.StatusCode, out
	}
	commits := e.c.Store().Commits()
	for _, tc := range []struct {
		name, bearer string
		status       int
		code         string
	}{
		{"no token", "", http.StatusUnauthorized, "AuthenticationFailed"},
		{"garbage", "a.b.c", http.StatusUnauthorized, "InvalidAuthenticationToken"},
		{"Key Vault audience", token(s.ClientID, s.ClientSecret, "https://vault.azure.net/.default"), http.StatusUnauthorized, "InvalidAuthenticationToken"},
		{"not the Owner", token(other.ClientID, otherSecret, armScope), http.StatusForbidden, "AuthorizationFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(tc.bearer)
			errObj, _ := out["error"].(map[string]any)
			if status != tc.status || errObj["code"] != tc.code {
				t.Fatalf("got %d %v, want %d %s", status, out, tc.status, tc.code)
			}
		})
	}
	if got := e.c.Store().Commits(); got != commits {
		t.Errorf("refused admin calls wrote to the store")
	}
	if status, out := call(token(s.ClientID, s.ClientSecret, armScope)); status != http.StatusCreated {
		t.Fatalf("Owner: %d %v", status, out)
	}
}
