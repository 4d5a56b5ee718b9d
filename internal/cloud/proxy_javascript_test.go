package cloud_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/testenv"
)

// TestJavaScriptSDKThroughProxy runs the JavaScript SDK with its defaults (testdata/js-proxy:
// DefaultAzureCredential, the ARM clients of the public cloud, SecretClient with challenge
// verification) with only the proxy's environment: it creates a group, an identity and a vault
// and writes and reads a secret under Azure's public names. It needs node and npm; without
// them, or without access to the npm registry, it skips.
func TestJavaScriptSDKThroughProxy(t *testing.T) {
	testenv.Tools(t, "hack/install-test-deps.sh (make test-deps)", "node", "npm")
	work := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "defaults.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "js-proxy", f))
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
		t.Fatalf("npm ci: %v\n%s", err, out)
	}

	e := startProxied(t)
	s := e.c.Settings()
	cmd := exec.CommandContext(t.Context(), "node", "defaults.mjs", "rg-js-proxy", "kvjsproxy1", s.ObjectID)
	cmd.Dir = work
	cmd.Env = proxyEnv(t, e.c)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node defaults.mjs: %v\n%s\ncloud log:\n%s", err, strings.ReplaceAll(stderr.String(), s.ClientSecret, "REDACTED"), tail(e.logs.String(), 4000))
	}
	var got map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("decode %q: %v", stdout.String(), err)
	}
	if want := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-js-proxy"; !strings.EqualFold(got["groupId"], want) {
		t.Errorf("groupId = %s, want %s", got["groupId"], want)
	}
	if got["vaultUri"] != "https://kvjsproxy1.vault.azure.net/" {
		t.Errorf("vaultUri = %s", got["vaultUri"])
	}
	if got["secretValue"] != "js-s3cret" || !strings.HasPrefix(got["secretId"], "https://kvjsproxy1.vault.azure.net/secrets/db-password/") {
		t.Errorf("secret: %v", got)
	}
	if p, err := e.c.Entra().Directory.Principal(t.Context(), s.TenantID, got["identityClientId"]); err != nil || p.DisplayName != "app-js" {
		t.Errorf("identity in the cloud: %+v %v", p, err)
	}
	logs := e.logs.String()
	for _, host := range []string{"login.microsoftonline.com", "management.azure.com", "kvjsproxy1.vault.azure.net"} {
		if !strings.Contains(logs, `"msg":"Proxy issued a certificate","service":"proxy","host":"`+host+`"`) {
			t.Errorf("no certificate issued for %s", host)
		}
	}
}
