package cloud_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// TestJavaScriptSDK runs @azure/identity (pinned in testdata/js) against the cloud: client
// secret, certificate and workload identity. It needs node and npm; without them, or without
// access to the npm registry, it skips.
func TestJavaScriptSDK(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	work := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "token.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "js", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.CommandContext(t.Context(), "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	install.Dir = work
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm ci failed (no registry access?): %v\n%s", err, out)
	}

	is := newIssuer(t)
	e := start(t, "", is.caPEM())
	s := e.c.Settings()
	dir := e.c.Entra().Directory
	mi, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "js"})
	if err != nil {
		t.Fatal(err)
	}
	const sub = "system:serviceaccount:ns:js"
	if _, err := dir.PutFederatedCredential(t.Context(), s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "k8s", Issuer: is.srv.URL, Subject: sub, Audiences: []string{exchangeAudience},
	}); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(work, "sa-token")
	if err := os.WriteFile(tokenFile, []byte(is.token(t, sub, exchangeAudience, e.clock.Now())), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), "node", "token.mjs")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), e.c.Env()...) // plain values: none of them needs shell quoting here
	cmd.Env = append(cmd.Env, "NODE_EXTRA_CA_CERTS="+s.CAFile, "WORKLOAD_CLIENT_ID="+mi.ClientID, "AZURE_FEDERATED_TOKEN_FILE="+tokenFile)
	var stderr []byte
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("node token.mjs: %v\n%s", err, stderr)
	}
	var toks map[string]string
	if err := json.Unmarshal(out, &toks); err != nil {
		t.Fatalf("decode node output: %v", err)
	}
	for name, want := range map[string]struct{ aud, oid string }{
		"secret":      {"https://management.azure.com", s.ObjectID},
		"certificate": {"https://vault.azure.net", s.ObjectID},
		"workload":    {"https://vault.azure.net", mi.ObjectID},
	} {
		claims, err := e.c.Entra().Verify(t.Context(), toks[name], func(aud string) bool { return aud == want.aud })
		if err != nil || claims.ObjectID != want.oid {
			t.Errorf("%s token: %v (claims %+v)", name, err, claims)
		}
	}
}
