package cloud_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// TestVaultLookupRefusals: the vault lookup answers unknown and invalid names in ARM's error
// shape without a token. Found vaults are looked up by every test of internal/csiprovider.
func TestVaultLookupRefusals(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{})
	hc := &http.Client{Transport: c.Transport()}
	for _, tc := range []struct {
		name   string
		status int
		code   string
	}{
		{"kv-unknown", http.StatusNotFound, "VaultNotFound"},
		{"a--", http.StatusBadRequest, "VaultNameNotValid"},
		{"x", http.StatusBadRequest, "VaultNameNotValid"},
	} {
		resp, err := hc.Get(c.Settings().URL + cloud.VaultLookupPath + tc.name)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status || body.Error.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, body.Error.Code, tc.status, tc.code)
		}
	}
}
