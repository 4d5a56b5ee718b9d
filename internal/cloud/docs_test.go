package cloud_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	ceruleancloud "github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// TestDocsGoEnvironmentCredential is the Go snippet of docs/cloud.md: EnvironmentCredential from
// the exported variables, with the CA passed through ClientOptions (Go reads SSL_CERT_FILE once
// per process).
func TestDocsGoEnvironmentCredential(t *testing.T) {
	e := start(t, "")
	s := e.c.Settings()
	t.Setenv("AZURE_TENANT_ID", s.TenantID)
	t.Setenv("AZURE_CLIENT_ID", s.ClientID)
	t.Setenv("AZURE_CLIENT_SECRET", s.ClientSecret)
	t.Setenv("AZURE_AUTHORITY_HOST", s.AuthorityHost)
	opts := e.c.ClientOptions()
	opts.Cloud = cloud.Configuration{} // the authority comes from AZURE_AUTHORITY_HOST, as in the docs
	cred, err := azidentity.NewEnvironmentCredential(&azidentity.EnvironmentCredentialOptions{
		ClientOptions: opts, DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := getToken(t, cred, armScope)
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	if claims := verify(t, e.c, tok.Token); claims.ObjectID != s.ObjectID {
		t.Errorf("oid = %s, want %s", claims.ObjectID, s.ObjectID)
	}
}

// TestWorkloadIdentityCredential exchanges a projected token file as a workload-identity pod does;
// the cloud trusts the issuer through a CA file, as with --trust-ca.
func TestWorkloadIdentityCredential(t *testing.T) {
	is := newIssuer(t)
	caFile := filepath.Join(t.TempDir(), "issuer-ca.pem")
	if err := os.WriteFile(caFile, is.caPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ceruleancloud.Start(t.Context(), ceruleancloud.Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), TrustCAFiles: []string{caFile}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e := &env{c: c, clock: newClock()}
	s := e.c.Settings()
	dir := e.c.Entra().Directory
	mi, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "pod"})
	if err != nil {
		t.Fatal(err)
	}
	const sub = "system:serviceaccount:ns:pod"
	if _, err := dir.PutFederatedCredential(t.Context(), s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "k8s", Issuer: is.srv.URL, Subject: sub, Audiences: []string{exchangeAudience},
	}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(is.token(t, sub, exchangeAudience, e.clock.Now())), 0o600); err != nil {
		t.Fatal(err)
	}
	cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
		ClientID: mi.ClientID, TenantID: s.TenantID, TokenFilePath: file,
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := getToken(t, cred, armScope)
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	if claims := verify(t, e.c, tok.Token); claims.ObjectID != mi.ObjectID {
		t.Errorf("oid = %s, want %s", claims.ObjectID, mi.ObjectID)
	}
}
