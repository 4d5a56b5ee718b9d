package cloud_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// rawAnswer is one answer, redirects not followed.
type rawAnswer struct {
	status int
	header http.Header
	body   map[string]any
}

// sendRaw sends a request without following redirects, so that a 3xx is seen, not hidden.
func sendRaw(t *testing.T, c *cloud.Cloud, method, u, token, contentType, body string) rawAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := &http.Client{Transport: c.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, u, err)
	}
	a := rawAnswer{status: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 && (a.status < 300 || a.status >= 400) {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: %d answer is not JSON: %.200q", method, u, resp.StatusCode, raw)
		}
	}
	return a
}

// armOrKeyVaultCode is error.code of ARM's and Key Vault's shape.
func armOrKeyVaultCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestUncleanPathsServedWithoutRedirect sends ARM, Entra ID, Key Vault, metadata and
// managed-identity requests on paths that Go's ServeMux would redirect (extra slashes, "." and
// ".." segments). None is ever answered with a 3xx (an SDK following it drops its bearer token):
// each gets the answer of its canonical path, or the service's own error.
func TestUncleanPathsServedWithoutRedirect(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	s := e.s
	armTok := cloudtest.Token(t, e.cred, "https://management.core.windows.net//.default")
	_, vaultURI := e.vaultClient(t, "kv-paths")
	kvTok := cloudtest.Token(t, e.cred, "https://vault.azure.net/.default")
	base := s.URL
	sub := "/subscriptions/" + s.SubscriptionID
	rg := sub + "/resourcegroups/rg-paths"
	mi := rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-paths"
	assignment := rg + "/providers/Microsoft.Authorization/roleAssignments/3f2d6f0e-8f43-4c55-9d1b-5d0c8a1f2b11"
	const jsonType = "application/json"

	field := func(path ...string) func(*testing.T, map[string]any) {
		return func(t *testing.T, b map[string]any) {
			t.Helper()
			var v any = b
			for _, k := range path {
				m, _ := v.(map[string]any)
				v = m[k]
			}
			if s, _ := v.(string); s == "" {
				t.Errorf("no %s in %v", strings.Join(path, "."), b)
			}
		}
	}
	armError := func(code string) func(*testing.T, map[string]any) {
		return func(t *testing.T, b map[string]any) {
			t.Helper()
			if got := armOrKeyVaultCode(b); got == "" || (code != "" && got != code) {
				t.Errorf("error code %q, want %q (body %v)", got, code, b)
			}
		}
	}
	var principalID string
	for _, tc := range []struct {
		name, method, url, token, ctype, body string
		want                                  int
		check                                 func(*testing.T, map[string]any)
	}{
		// ARM: a scope that starts with "/" doubles the first slash; every method is served.
		{"ARM GET //subscriptions", http.MethodGet, base + "/" + sub + "?api-version=2022-12-01", armTok, "", "", http.StatusOK, field("subscriptionId")},
		{"ARM PUT //group", http.MethodPut, base + "/" + rg + "?api-version=2025-04-01", armTok, jsonType, `{"location":"eastus"}`, http.StatusCreated, field("id")},
		{"ARM HEAD ///group", http.MethodHead, base + "//" + rg + "?api-version=2025-04-01", armTok, "", "", http.StatusNoContent, nil},
		{"ARM PUT //identity", http.MethodPut, base + "/" + mi + "?api-version=2024-11-30", armTok, jsonType, `{"location":"eastus"}`, http.StatusCreated, func(t *testing.T, b map[string]any) {
			field("properties", "principalId")(t, b)
			p, _ := b["properties"].(map[string]any)
			principalID, _ = p["principalId"].(string)
		}},
		{"ARM PATCH //identity", http.MethodPatch, base + "/" + mi + "?api-version=2024-11-30", armTok, jsonType, `{"tags":{"via":"double-slash"}}`, http.StatusOK, field("tags", "via")},
		{"ARM POST //checkNameAvailability", http.MethodPost, base + "/" + sub + "/providers/Microsoft.KeyVault/checkNameAvailability?api-version=2026-02-01", armTok, jsonType,
			`{"name":"kv-free-name","type":"Microsoft.KeyVault/vaults"}`, http.StatusOK, nil},
		{"ARM PUT //roleAssignment", http.MethodPut, base + "/" + assignment + "?api-version=2022-04-01", armTok, jsonType, "", http.StatusCreated, field("properties", "scope")},
		{"ARM GET //roleAssignment", http.MethodGet, base + "/" + assignment + "?api-version=2022-04-01", armTok, "", "", http.StatusOK, field("properties", "principalId")},
		{"ARM DELETE //roleAssignment", http.MethodDelete, base + "/" + assignment + "?api-version=2022-04-01", armTok, "", "", http.StatusOK, field("id")},
		{"ARM empty segment inside", http.MethodGet, base + sub + "//resourcegroups?api-version=2025-04-01", armTok, "", "", http.StatusBadRequest, armError("InvalidResourceId")},
		{"ARM dot segment", http.MethodGet, base + sub + "/./resourcegroups?api-version=2025-04-01", armTok, "", "", 0, armError("")},
		{"ARM without token", http.MethodGet, base + "/" + sub + "?api-version=2022-12-01", "", "", "", http.StatusUnauthorized, armError("AuthenticationFailed")},
		{"ARM DELETE //group", http.MethodDelete, base + "/" + rg + "?api-version=2025-04-01", armTok, "", "", http.StatusAccepted, nil},
		// The cloud-metadata document and Entra ID: served on the cleaned path.
		{"metadata //", http.MethodGet, base + "//metadata/endpoints?api-version=2022-09-01", "", "", "", http.StatusOK, field("resourceManager")},
		{"Entra token //tenant", http.MethodPost, base + "//" + s.TenantID + "/oauth2/v2.0/token", "", "application/x-www-form-urlencoded",
			url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret}, "scope": {"https://vault.azure.net/.default"}}.Encode(),
			http.StatusOK, field("access_token")},
		{"Entra OpenID configuration /./", http.MethodGet, base + "/" + s.TenantID + "/./v2.0/.well-known/openid-configuration", "", "", "", http.StatusOK, field("issuer")},
		{"Entra keys /../", http.MethodGet, base + "/elsewhere/../" + s.TenantID + "/discovery/v2.0/keys", "", "", "", http.StatusOK, nil},
		{"Entra unknown after cleaning", http.MethodGet, base + "/" + s.TenantID + "/oauth2/v2.0/token/../..", "", "", "", http.StatusNotFound, field("error")},
		// The managed-identity endpoint answers in its own shape.
		{"IMDS //", http.MethodGet, base + "//metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://vault.azure.net", "", "", "", http.StatusBadRequest, field("error")},
		// Key Vault routes on its own and never redirects: unclean paths are its own errors.
		{"Key Vault //secrets", http.MethodGet, vaultURI + "/secrets/x?api-version=7.5", kvTok, "", "", http.StatusNotFound, armError("NotFound")},
		{"Key Vault /./", http.MethodGet, vaultURI + "secrets/./x?api-version=7.5", kvTok, "", "", http.StatusBadRequest, armError("BadParameter")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.name == "ARM PUT //roleAssignment" {
				if principalID == "" {
					t.Fatal("the identity was not created")
				}
				body = `{"properties":{"roleDefinitionId":"` + sub + `/providers/Microsoft.Authorization/roleDefinitions/` + authz.Reader +
					`","principalId":"` + principalID + `","principalType":"ServicePrincipal"}}`
			}
			a := sendRaw(t, e.c, tc.method, tc.url, tc.token, tc.ctype, body)
			if a.status >= 300 && a.status < 400 {
				t.Fatalf("%s %s answered %d Location=%q", tc.method, tc.url, a.status, a.header.Get("Location"))
			}
			if tc.want != 0 && a.status != tc.want {
				t.Errorf("%s %s: %d, want %d (body %v)", tc.method, tc.url, a.status, tc.want, a.body)
			}
			if tc.check != nil {
				tc.check(t, a.body)
			}
		})
	}
}
