package cloud_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/pki"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// TestStateHoldsNoBootstrapSecret: the state file (the bytes of state.db, free pages included)
// holds neither the bootstrap principal's client secret nor its certificate's key, only the
// secret's hash; both live in 0600 files of their own, and work after a restart.
func TestStateHoldsNoBootstrapSecret(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	s := e.c.Settings()
	wantBootstrapCreds(t, e, s.ClientSecret)
	keyPEM := bootstrapKeyPEM(t, s.ClientCertificatePath)
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	state := readState(t, dir)
	wantNoSecrets(t, state, s.ClientSecret, keyPEM)
	sum := sha256.Sum256([]byte(s.ClientSecret))
	if !bytes.Contains(state, []byte(base64.StdEncoding.EncodeToString(sum[:]))) {
		t.Error("state.db lacks the secret's hash: where did the principal's secret go?")
	}

	// A restart reads the same credentials back from their files.
	e2 := start(t, dir)
	if got := e2.c.Settings().ClientSecret; got != s.ClientSecret {
		t.Errorf("secret after restart = %q..., want the first start's", got[:3])
	}
	wantBootstrapCreds(t, e2, s.ClientSecret)
	env, err := cloud.ReadEnv(dir)
	if err != nil || !strings.Contains(env, "export AZURE_CLIENT_SECRET="+s.ClientSecret+"\n") {
		t.Errorf("cloud env after restart lacks the secret (err %v)", err)
	}
}

// TestLegacyStateMigrated: a data directory written by the previous version, whose state held
// the bootstrap secret and certificate key in clear, is migrated on start: the same credentials
// keep working, they move to their files, and no byte of them is left in state.db.
func TestLegacyStateMigrated(t *testing.T) {
	dir := t.TempDir()
	secret, certPEM := writeLegacyState(t, dir)
	keyPEM := bootstrapKeyPEM(t, filepath.Join(dir, "bootstrap-client.pem"))
	if state := readState(t, dir); !bytes.Contains(state, []byte(secret)) {
		t.Fatal("the legacy fixture does not hold the secret in clear: it tests nothing")
	}

	e := start(t, dir)
	s := e.c.Settings()
	if s.ClientSecret != secret {
		t.Fatalf("secret after migration = %q..., want the legacy one", s.ClientSecret[:3])
	}
	wantBootstrapCreds(t, e, secret)
	if got, err := os.ReadFile(s.ClientCertificatePath); err != nil || !bytes.Equal(got, certPEM) {
		t.Errorf("certificate file after migration differs from the legacy certificate (err %v)", err)
	}
	if !strings.Contains(e.logs.String(), "Moved the bootstrap principal's credentials out of the state") {
		t.Error("the migration was not logged")
	}
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	wantNoSecrets(t, readState(t, dir), secret, keyPEM)
	if _, err := os.Stat(filepath.Join(dir, "state.db.rewrite")); !os.IsNotExist(err) {
		t.Errorf("the rewrite's copy is left behind: %v", err)
	}

	// Everything else survived the rewrite, and the next start has nothing to migrate.
	e2 := start(t, dir)
	s2 := e2.c.Settings()
	if s2.ClientSecret != secret || s2.TenantID != s.TenantID || s2.SubscriptionID != s.SubscriptionID || s2.ObjectID != s.ObjectID {
		t.Errorf("settings changed across the second start: %+v", s2)
	}
	wantBootstrapCreds(t, e2, secret)
	if strings.Contains(e2.logs.String(), "Moved the bootstrap") {
		t.Error("the second start migrated again")
	}
}

// TestBootstrapSecretFileLost: without its file the secret cannot be recovered (the state has
// only its hash): the next start issues a new one, which works, and writes it to a new file.
func TestBootstrapSecretFileLost(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	old := e.c.Settings().ClientSecret
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "bootstrap-secret")); err != nil {
		t.Fatal(err)
	}
	e2 := start(t, dir)
	s := e2.c.Settings()
	if s.ClientSecret == old || s.ClientSecret == "" {
		t.Fatal("no new secret was issued")
	}
	wantBootstrapCreds(t, e2, s.ClientSecret)
	if !strings.Contains(e2.logs.String(), "issuing a new secret") {
		t.Error("the new secret was not logged")
	}
}

// wantBootstrapCreds checks the credential files (0600, the secret's holding exactly secret) and
// that the secret and the certificate both get tokens from the cloud.
func wantBootstrapCreds(t *testing.T, e *env, secret string) {
	t.Helper()
	s := e.c.Settings()
	for _, f := range []string{filepath.Join(s.DataDir, "bootstrap-secret"), s.ClientCertificatePath} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "bootstrap-secret")); err != nil || strings.TrimSpace(string(b)) != secret {
		t.Errorf("bootstrap-secret does not hold the secret (err %v)", err)
	}
	if _, err := getToken(t, secretCred(t, e.c, s.TenantID, s.ClientID, secret), armScope); err != nil {
		t.Errorf("token with the bootstrap secret: %v", err)
	}
	certs, key := bootstrapKey(t, s)
	cred, err := azidentity.NewClientCertificateCredential(s.TenantID, s.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
		ClientOptions: e.c.ClientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getToken(t, cred, armScope); err != nil {
		t.Errorf("token with the bootstrap certificate: %v", err)
	}
}

// wantNoSecrets fails if state holds the secret or the key, in any encoding the store could
// have written them in (raw, base64 as JSON writes []byte, the key's DER and PEM lines).
func wantNoSecrets(t *testing.T, state []byte, secret string, keyPEM []byte) {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	keyB64 := base64.StdEncoding.EncodeToString(block.Bytes)
	for name, piece := range map[string]string{
		"the secret":                  secret,
		"the secret, base64":          base64.StdEncoding.EncodeToString([]byte(secret)),
		"the secret's middle":         secret[10:30],
		"the key's DER":               string(block.Bytes[len(block.Bytes)/2 : len(block.Bytes)/2+32]),
		"a line of the key's PEM":     keyB64[640:704],
		"the key's PEM, base64 (old)": base64.StdEncoding.EncodeToString(keyPEM)[300:364],
	} {
		if bytes.Contains(state, []byte(piece)) {
			t.Errorf("state.db holds %s", name)
		}
	}
}

func readState(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bootstrapKeyPEM is the PRIVATE KEY block of a certificate-then-key PEM file.
func bootstrapKeyPEM(t *testing.T, path string) []byte {
	t.Helper()
	rest, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			t.Fatalf("%s has no private key", path)
		}
		if strings.Contains(block.Type, "PRIVATE KEY") {
			return pem.EncodeToMemory(block)
		}
	}
}

// writeLegacyState writes a data directory as the version before this one left it: the tenant,
// the Owner principal with a secret and a certificate, and the bootstrap record holding the
// secret and the certificate with its key in clear, as that version's ensureBootstrap did (its
// JSON field names), plus the certificate file its Start wrote. It returns the secret and PEM.
func writeLegacyState(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now
	d := entra.NewDirectory(st, now)
	tenant, err := d.CreateTenant(t.Context(), "Cerulean")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.CreatePrincipal(t.Context(), entra.Principal{TenantID: tenant.ID, Kind: entra.KindServicePrincipal, DisplayName: "cerulean-bootstrap"})
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := d.AddSecret(t.Context(), tenant.ID, p.ClientID, now().AddDate(10, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	cert, certPEM, err := pki.SelfSigned("cerulean-bootstrap", now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddCertificate(t.Context(), tenant.ID, p.ClientID, cert); err != nil {
		t.Fatal(err)
	}
	legacy := map[string]any{
		"tenantId": tenant.ID, "subscriptionId": uuid.NewString(), "clientId": p.ClientID, "objectId": p.ObjectID,
		"clientSecret": secret, "clientCertPem": certPEM,
	}
	if err := st.Update(t.Context(), func(tx *store.Tx) error { return tx.Put("cloud", "bootstrap", legacy) }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap-client.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return secret, certPEM
}
