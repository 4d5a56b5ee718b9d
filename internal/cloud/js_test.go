package cloud_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/testenv"
)

// jsFiles are copied from testdata/js into the test's working directory.
var jsFiles = []string{"package.json", "package-lock.json", "token.mjs", "scenario.mjs", "keys.mjs"}

// installJS copies testdata/js to a temporary directory and installs the packages pinned in its
// package-lock.json there. node and npm come with the machine (`make test-deps` installs them
// where they are missing); only a machine that cannot reach the npm registry skips.
func installJS(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run `make test-deps`", tool)
		}
	}
	work := t.TempDir()
	for _, f := range jsFiles {
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
	out, err := install.CombinedOutput()
	if err == nil {
		return work
	}
	ping := exec.CommandContext(t.Context(), "npm", "ping", "--loglevel=error")
	if pout, perr := ping.CombinedOutput(); perr != nil {
		testenv.Missing(t, "the npm registry is not reachable from this machine, so the pinned JavaScript SDKs cannot be installed "+
			"(npm ping: %v: %s)", perr, strings.TrimSpace(string(pout)))
	}
	t.Fatalf("npm ci: %v\n%s", err, out)
	return ""
}

// runNode runs a script of the working directory with the cloud's environment and decodes the
// JSON it prints.
func runNode(t *testing.T, node nodeRuntime, work, script string, c *cloud.Cloud, extraEnv []string, out any) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), node.path, append(slices.Clone(node.flags), script)...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), c.Env()...) // plain values: none of them needs shell quoting here
	cmd.Env = append(cmd.Env, "NODE_EXTRA_CA_CERTS="+c.Settings().CAFile)
	cmd.Env = append(cmd.Env, extraEnv...)
	stdout, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("%s %s: %v\n%s", node.path, script, err, ee.Stderr)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", node.path, script, err)
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("decode the output of %s: %v", script, err)
	}
}

// TestJavaScriptSDK runs the JavaScript SDKs pinned in testdata/js against the cloud:
// @azure/identity's credentials (token.mjs), then the whole scenario (scenario.mjs) on every
// Node.js this machine has for it.
func TestJavaScriptSDK(t *testing.T) {
	work := installJS(t)
	t.Run("credentials", func(t *testing.T) { testJSCredentials(t, work) })
	t.Run("keys", func(t *testing.T) { testJSKeys(t, work) })
	for _, n := range nodeVersions(t) {
		t.Run("scenario/"+n.name, func(t *testing.T) {
			if n.path == "" {
				testenv.Missing(t, "Debian's Node.js is not unpacked at %s: hack/install-debian-node.sh (make test-deps) unpacks it", debianNode())
			}
			runScenario(t, work, n)
		})
	}
}

// testJSCredentials gets tokens with @azure/identity: client secret, certificate and workload
// identity.
func testJSCredentials(t *testing.T, work string) {
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
	var toks map[string]string
	runNode(t, nodeRuntime{path: "node", flags: webCryptoFlag(nodeVersion(t, "node"))}, work, "token.mjs", e.c, []string{"WORKLOAD_CLIENT_ID=" + mi.ClientID, "AZURE_FEDERATED_TOKEN_FILE=" + tokenFile}, &toks)
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

// scenarioResult is what scenario.mjs prints.
type scenarioResult struct {
	GroupID, IdentityID, PrincipalID, ClientID string
	VaultID, VaultURI                          string
	WithoutRole                                any
	RoleAssignmentID, RoleAssignmentScope      string
	SecretVersion, SecretVersionRead           string
	SecretValue                                string
	GroupExistsAfterDelete                     bool
}

// jsDefaultVersions are the api-versions the pinned JavaScript SDKs send (the JavaScript rows of
// internal/cloud/arm/integration's TestSDKDefaultAPIVersionsAccepted); the request log must
// show exactly these.
var jsDefaultVersions = map[string]string{
	"/resourcegroups/":                                    "2025-04-01", // @azure/arm-resources 8.0.0
	"/providers/microsoft.managedidentity/":               "2024-11-30", // @azure/arm-msi 2.2.0
	"/providers/microsoft.keyvault/vaults/":               "2026-02-01", // @azure/arm-keyvault 5.0.0
	"/providers/microsoft.authorization/roleassignments/": "2022-04-01", // @azure/arm-authorization 9.0.0
	"/providers/microsoft.authorization/roledefinitions":  "2022-04-01",
}

// runScenario runs scenario.mjs on one Node.js: group, identity with a federated credential,
// vault, role assignment, secret set and get through workload identity, group delete. It
// checks each step's result in the cloud, the api-versions the SDKs sent, and that no answer
// was a redirect.
func runScenario(t *testing.T, work string, node nodeRuntime) {
	is := newIssuer(t)
	e := start(t, "", is.caPEM())
	s := e.c.Settings()
	const subject = "system:serviceaccount:ns:scenario"
	tokenFile := filepath.Join(t.TempDir(), "sa-token")
	if err := os.WriteFile(tokenFile, []byte(is.token(t, subject, exchangeAudience, e.clock.Now())), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	value := hex.EncodeToString(secret)
	since := e.c.RequestLog().Last()
	var res scenarioResult
	runNode(t, node, work, "scenario.mjs", e.c, []string{
		"SCENARIO_GROUP=rg-js", "SCENARIO_VAULT=kv-js-scenario", "SCENARIO_ISSUER=" + is.srv.URL, "SCENARIO_SUBJECT=" + subject,
		"SCENARIO_SECRET=" + value, "AZURE_FEDERATED_TOKEN_FILE=" + tokenFile,
	}, &res)

	rg := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-js"
	if !strings.EqualFold(res.GroupID, rg) || !strings.EqualFold(res.VaultID, rg+"/providers/Microsoft.KeyVault/vaults/kv-js-scenario") {
		t.Errorf("group %q, vault %q", res.GroupID, res.VaultID)
	}
	if res.PrincipalID == "" || res.ClientID == "" || !strings.HasPrefix(res.VaultURI, "https://127.0.0.1:") {
		t.Errorf("identity %q/%q, vaultUri %q", res.PrincipalID, res.ClientID, res.VaultURI)
	}
	if res.WithoutRole != float64(http.StatusForbidden) {
		t.Errorf("setting a secret without a role: %v, want 403", res.WithoutRole)
	}
	if !strings.EqualFold(res.RoleAssignmentScope, res.VaultID) || !strings.HasPrefix(strings.ToLower(res.RoleAssignmentID), strings.ToLower(res.VaultID)+"/providers/microsoft.authorization/roleassignments/") {
		t.Errorf("role assignment %q at %q", res.RoleAssignmentID, res.RoleAssignmentScope)
	}
	if res.SecretValue != value || res.SecretVersion == "" || res.SecretVersion != res.SecretVersionRead {
		t.Errorf("secret read back does not match what was set (versions %q, %q)", res.SecretVersion, res.SecretVersionRead)
	}
	if res.GroupExistsAfterDelete {
		t.Error("the group still exists after its delete completed")
	}
	// The delete took the identity's principal and the assignment with it.
	if _, err := e.c.Entra().Directory.Principal(t.Context(), s.TenantID, res.ClientID); err == nil {
		t.Error("the identity's principal outlived its group")
	}

	entries := e.c.Requests(reqlog.Filter{Since: since})
	seen := map[string]bool{}
	for _, r := range entries {
		if r.Status >= 300 && r.Status < 400 {
			t.Errorf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
		if r.Service != "arm" {
			continue
		}
		// The provider of a request is the last one its path names.
		p, frag, at := strings.ToLower(r.Path), "", -1
		for f := range jsDefaultVersions {
			if i := strings.LastIndex(p, f); i > at {
				frag, at = f, i
			}
		}
		if frag == "" || strings.Contains(p, "/operation") {
			continue
		}
		seen[frag] = true
		if want := jsDefaultVersions[frag]; r.APIVersion != want {
			t.Errorf("%s %s sent api-version %s, want %s", r.Method, r.Path, r.APIVersion, want)
		}
	}
	for frag := range jsDefaultVersions {
		if !seen[frag] {
			t.Errorf("no ARM request to %s in the request log", frag)
		}
	}
	if puts := e.c.Requests(reqlog.Filter{Service: "arm", Method: http.MethodPut, PathPrefix: res.VaultID + "/providers/Microsoft.Authorization/roleAssignments/", Since: since}); len(puts) != 1 || puts[0].Status != http.StatusCreated {
		t.Errorf("role assignment PUTs: %+v", puts)
	}
	if sets := e.c.Requests(reqlog.Filter{Service: "keyvault", Method: http.MethodPut, Since: since}); len(sets) == 0 || sets[len(sets)-1].APIVersion != "2026-04-01" {
		t.Errorf("secret PUTs: %+v, want the last with @azure/keyvault-secrets 4.12.0's 2026-04-01", sets)
	}
}
