package entra

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// TestVerifyAcceptsBothSetsOfNames: a tenant's tokens are accepted under the cloud's own issuer
// and Azure's public v2 and v1 issuers (same keys, same tenant); any other issuer, or a public
// issuer naming another tenant, is refused.
func TestVerifyAcceptsBothSetsOfNames(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(ctx, Options{Store: st, BaseURL: "https://127.0.0.1:8443"})
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := s.Directory.CreateTenant(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Directory.CreatePrincipal(ctx, Principal{TenantID: tenant.ID, Kind: KindServicePrincipal, DisplayName: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	for iss, ok := range map[string]bool{
		s.Issuer(tenant.ID):                             true,
		azurenames.Issuer(tenant.ID):                    true,
		azurenames.V1Issuer(tenant.ID):                  true,
		azurenames.Issuer("another-tenant"):             false,
		"https://login.example.org/" + tenant.ID:        false,
		"https://127.0.0.1:9999/" + tenant.ID + "/v2.0": false,
	} {
		raw, _, err := s.sign(ctx, p, iss, "https://management.azure.com/", "1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Verify(ctx, raw, func(string) bool { return true })
		if ok && err != nil {
			t.Errorf("iss %s refused: %v", iss, err)
		}
		if !ok && !errors.Is(err, ErrInvalidToken) {
			t.Errorf("iss %s: %v, want ErrInvalidToken", iss, err)
		}
	}
}
