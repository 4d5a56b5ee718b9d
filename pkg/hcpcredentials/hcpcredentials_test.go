package hcpcredentials_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"sigs.k8s.io/secrets-store-csi-driver/pkg/util/fileutil"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/csiprovider/csiprovidertest"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// chain is a CA and a leaf it signed, with the leaf's key: what a credentials file holds.
type chain struct {
	ca, leaf *x509.Certificate
	pem      []byte // leaf, CA, key
}

func newChain(t *testing.T, cn string) chain {
	t.Helper()
	caKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn + " CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	var b []byte
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})...)
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	return chain{ca: ca, leaf: leaf, pem: b}
}

func credentialsJSON(t *testing.T, s cloud.Settings, p entra.Principal, c chain, notBefore time.Time) string {
	t.Helper()
	b, err := json.Marshal(hcpcredentials.File{
		AuthenticationEndpoint: s.AuthorityHost, ClientID: p.ClientID, TenantID: s.TenantID, ObjectID: p.ObjectID,
		ClientSecret: base64.StdEncoding.EncodeToString(c.pem), NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour),
		RenewAfter: notBefore.Add(12 * time.Hour), CannotRenewAfter: notBefore.Add(20 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRotationThroughTheProvider is the control-plane flow from Key Vault to a component: the
// credentials JSON in Key Vault is mounted by the CSI provider (driven over its socket as the
// driver's rotation drives it, files written by the driver's own writer), the component
// authenticates with the certificate in it, the secret is rotated in Key Vault, the provider's
// Mount runs again, and the component's next token comes from the new certificate without a
// restart.
func TestRotationThroughTheProvider(t *testing.T) {
	ctx := t.Context()
	clock := cloudtest.NewClock()
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := c.Settings()
	owner := cloudtest.OwnerCred(t, c)
	cloudtest.CreateGroup(t, c, owner, cloudtest.ARMOptions(c), "eastus", "rg-hcp")
	vault := cloudtest.CreateRBACVault(t, c, owner, cloudtest.ARMOptions(c), "eastus", "rg-hcp", "kv-hcp")
	dir := c.Entra().Directory
	reader, _ := cloudtest.NewPrincipal(t, c, "kv-reader")
	readerSecret, _, err := dir.AddSecret(ctx, s.TenantID, reader.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i, g := range []struct{ principal, role string }{{s.ObjectID, authz.KeyVaultSecretsOfficer}, {reader.ObjectID, authz.KeyVaultSecretsUser}} {
		name := []string{"9f0c7a52-1d2e-4c7b-8a55-0d3a2f1b6c01", "9f0c7a52-1d2e-4c7b-8a55-0d3a2f1b6c02"}[i]
		if err := c.ARM().Authz().Ensure(ctx, authz.Assignment{ID: authz.AssignmentID(*vault.ID, name), Name: name, Scope: *vault.ID,
			RoleDefinitionID: g.role, PrincipalID: g.principal, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now}); err != nil {
			t.Fatal(err)
		}
	}
	// The component's managed identity, with the first certificate registered on its principal.
	mi, err := dir.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "managed-azure-cpo",
		ResourceID: "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-hcp/providers/Microsoft.ManagedIdentity/userAssignedIdentities/cpo"})
	if err != nil {
		t.Fatal(err)
	}
	first, second := newChain(t, "cpo-1"), newChain(t, "cpo-2")
	if _, err := dir.AddCertificate(ctx, s.TenantID, mi.ClientID, first.leaf); err != nil {
		t.Fatal(err)
	}
	sc, err := azsecrets.NewClient(*vault.Properties.VaultURI, owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	setCreds := func(value string) {
		if _, err := sc.SetSecret(ctx, "cpo-credentials", azsecrets.SetSecretParameters{Value: to.Ptr(value)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().UTC().Truncate(time.Second)
	setCreds(credentialsJSON(t, s, mi, first, t0))

	// The provider, reached over its socket.
	p, err := csiprovider.New(csiprovider.Options{Azure: azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName: cloud.CloudName, VaultLookupURL: s.URL + cloud.VaultLookupPath, CacheTTL: time.Minute, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	client := csiprovidertest.Serve(t, p)
	// The SecretProviderClass the manager creates per component (here with a service principal
	// in place of the node's identity), as the driver sends it.
	attrib, _ := json.Marshal(map[string]string{"usePodIdentity": "false", "keyvaultName": "kv-hcp", "tenantId": s.TenantID,
		"objects":               "array:\n  - |\n    objectName: cpo-credentials\n    objectEncoding: utf-8\n    objectType: secret\n",
		csiprovider.AttrPodName: "control-plane-operator-0", csiprovider.AttrPodNamespace: "clusters-hcp"})
	secrets, _ := json.Marshal(map[string]string{"clientid": reader.ClientID, "clientsecret": readerSecret})
	perm, _ := json.Marshal(os.FileMode(0o644))
	target := t.TempDir() // /mnt/certs in the component's pod
	mount := func() {
		t.Helper()
		resp, err := client.Mount(ctx, &v1alpha1.MountRequest{Attributes: string(attrib), Secrets: string(secrets), TargetPath: target, Permission: string(perm)})
		if err != nil {
			t.Fatalf("mount: %v", err)
		}
		if err := fileutil.WritePayloads(target, resp.GetFiles()); err != nil {
			t.Fatal(err)
		}
	}
	mount()

	// The component.
	t.Setenv(hcpcredentials.EnvPath, filepath.Join(target, "cpo-credentials"))
	cred, err := hcpcredentials.New(ctx, hcpcredentials.Options{ClientOptions: cloudtest.NoRetry(c), ReloadInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	token := func(scope string) (string, error) {
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
		return tok.Token, err
	}
	tok, err := token("https://management.core.windows.net//.default")
	if err != nil {
		t.Fatalf("token with the first certificate: %v", err)
	}
	claims, err := c.Entra().Verify(ctx, tok, func(string) bool { return true })
	if err != nil || claims.AppID != mi.ClientID || claims.MIResource != mi.ResourceID {
		t.Fatalf("claims %+v, %v", claims, err)
	}

	// Rotation: the second certificate is registered, the new file goes to Key Vault, the
	// driver's rotation mounts again once the cache entry is older than the TTL, and the first
	// certificate is withdrawn.
	if _, err := dir.AddCertificate(ctx, s.TenantID, mi.ClientID, second.leaf); err != nil {
		t.Fatal(err)
	}
	setCreds(credentialsJSON(t, s, mi, second, t0.Add(time.Hour)))
	clock.Advance(2 * time.Minute)
	mount()
	deadline := time.Now().Add(30 * time.Second) // bounds a hung test; fsnotify answers in milliseconds
	for !cred.Current().NotBefore.Equal(t0.Add(time.Hour)) {
		if time.Now().After(deadline) {
			t.Fatalf("the component did not load the rotated file: %+v", cred.Current())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := dir.UpdatePrincipal(ctx, s.TenantID, mi.ClientID, func(p *entra.Principal) error {
		p.Certificates = p.Certificates[1:]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := token("https://vault.azure.net/.default"); err != nil {
		t.Fatalf("token after the rotation (only the second certificate is registered): %v", err)
	}

	// An older file mounted later (a stale replica) is not swapped to.
	setCreds(credentialsJSON(t, s, mi, first, t0))
	clock.Advance(2 * time.Minute)
	mount()
	if swapped, err := cred.Reload(); err != nil || swapped || !cred.Current().NotBefore.Equal(t0.Add(time.Hour)) {
		t.Fatalf("reload of an older file: swapped %v, %v, current %+v", swapped, err, cred.Current())
	}
}

// TestNeverExpired: a credential past not_after is not used, and an expired file is refused at
// start.
func TestNeverExpired(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{})
	s := c.Settings()
	mi := entra.Principal{ClientID: "00000000-0000-0000-0000-000000000001", ObjectID: "o"}
	ch := newChain(t, "x")
	dir := t.TempDir()
	path := filepath.Join(dir, "creds.json")
	clock := cloudtest.NewClock()
	if err := os.WriteFile(path, []byte(credentialsJSON(t, s, mi, ch, clock.Now().Add(-time.Hour))), 0o600); err != nil {
		t.Fatal(err)
	}
	cred, err := hcpcredentials.New(t.Context(), hcpcredentials.Options{Path: path, Clock: clock.Now, ClientOptions: cloudtest.NoRetry(c)})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(24 * time.Hour)
	_, err = cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}})
	if !errors.Is(err, hcpcredentials.ErrExpired) {
		t.Fatalf("GetToken after not_after: %v, want ErrExpired", err)
	}
	if _, err := hcpcredentials.New(t.Context(), hcpcredentials.Options{Path: path, Clock: clock.Now}); !errors.Is(err, hcpcredentials.ErrExpired) {
		t.Fatalf("New with an expired file: %v", err)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not json":      "{",
		"no client id":  `{"authentication_endpoint":"https://x/","client_secret":"eA==","tenant_id":"t","not_before":"2026-01-01T00:00:00Z","not_after":"2026-01-02T00:00:00Z"}`,
		"bad base64":    `{"authentication_endpoint":"https://x/","client_id":"c","client_secret":"%%%","tenant_id":"t","not_before":"2026-01-01T00:00:00Z","not_after":"2026-01-02T00:00:00Z"}`,
		"no pem":        `{"authentication_endpoint":"https://x/","client_id":"c","client_secret":"c2VjcmV0LXZhbHVl","tenant_id":"t","not_before":"2026-01-01T00:00:00Z","not_after":"2026-01-02T00:00:00Z"}`,
		"inverted time": `{"authentication_endpoint":"https://x/","client_id":"c","client_secret":"eA==","tenant_id":"t","not_before":"2026-01-02T00:00:00Z","not_after":"2026-01-01T00:00:00Z"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := hcpcredentials.Parse([]byte(body))
			if !errors.Is(err, hcpcredentials.ErrInvalid) {
				t.Fatalf("got %v", err)
			}
			if name == "no pem" && err != nil && (strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), "c2VjcmV0")) {
				t.Errorf("error repeats the secret: %v", err)
			}
		})
	}
}
