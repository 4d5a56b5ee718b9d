package cloud_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// azThroughProxy runs the Azure CLI with its default cloud (AzureCloud) and only the proxy's
// environment, its state in a temporary directory. HTTP_PROXY names the proxy too, so that no
// request of the CLI, plain HTTP or not, can leave the machine (the proxy refuses both).
func azThroughProxy(t *testing.T, e *env, config string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // a bound against a hung CLI
	defer cancel()
	cmd := exec.CommandContext(ctx, "az", append(args, "--only-show-errors")...)
	cmd.Env = append(proxyEnv(t, e.c),
		"AZURE_CONFIG_DIR="+config, "AZURE_CORE_COLLECT_TELEMETRY=false", "AZURE_CORE_NO_COLOR=true",
		"AZURE_CORE_SURVEY_MESSAGE=false", "HTTP_PROXY="+e.c.Settings().ProxyURL)
	cmd.Dir = config
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestAzureCLIThroughProxy: the Azure CLI in Debian (2.45), with its default cloud and no
// registration, logs in with the service principal's secret, creates a resource group, and
// through `az rest` creates a vault and writes and reads a secret, all under Azure's public
// names through the proxy.
func TestAzureCLIThroughProxy(t *testing.T) {
	needAz(t)
	e := startProxied(t)
	s := e.c.Settings()
	config := t.TempDir()
	redact := func(v string) string { return strings.ReplaceAll(v, s.ClientSecret, "REDACTED") }
	az := func(v any, args ...string) {
		t.Helper()
		out, errOut, err := azThroughProxy(t, e, config, append(args, "-o", "json")...)
		if err != nil {
			t.Fatalf("az %s: %v\n%s\ncloud log:\n%s", redact(strings.Join(args, " ")), err, redact(errOut), tail(e.logs.String(), 3000))
		}
		if v != nil && strings.TrimSpace(out) != "" {
			if err := json.Unmarshal([]byte(out), v); err != nil {
				t.Fatalf("az %s: decode %q: %v", args[0], out, err)
			}
		}
	}
	var clouds []struct {
		Name     string
		IsActive bool
	}
	az(&clouds, "cloud", "list")
	for _, c := range clouds {
		if c.IsActive && c.Name != "AzureCloud" {
			t.Fatalf("active cloud %s, want the default AzureCloud", c.Name)
		}
	}
	var accounts []struct{ ID, TenantID string }
	az(&accounts, "login", "--service-principal", "-u", s.ClientID, "-p", s.ClientSecret, "--tenant", s.TenantID)
	if len(accounts) != 1 || accounts[0].ID != s.SubscriptionID || accounts[0].TenantID != s.TenantID {
		t.Fatalf("login: %+v", accounts)
	}
	var account struct{ ID, EnvironmentName string }
	az(&account, "account", "show")
	if account.ID != s.SubscriptionID || account.EnvironmentName != "AzureCloud" {
		t.Errorf("account show: %+v, want the subscription in AzureCloud", account)
	}
	var group struct{ ID string }
	az(&group, "group", "create", "-n", "rg-cli-proxy", "-l", "westeurope")
	if want := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-cli-proxy"; !strings.EqualFold(group.ID, want) {
		t.Errorf("group create: %+v", group)
	}
	vaultURL := "https://management.azure.com/subscriptions/" + s.SubscriptionID +
		"/resourceGroups/rg-cli-proxy/providers/Microsoft.KeyVault/vaults/kvcliproxy1?api-version=2022-07-01"
	body, _ := json.Marshal(map[string]any{"location": "westeurope", "properties": map[string]any{
		"tenantId": s.TenantID, "sku": map[string]string{"family": "A", "name": "standard"},
		"accessPolicies": []any{map[string]any{"tenantId": s.TenantID, "objectId": s.ObjectID, "permissions": map[string]any{"secrets": []string{"all"}}}},
	}})
	az(nil, "rest", "--method", "put", "--url", vaultURL, "--body", string(body))
	var vault struct {
		Properties struct{ VaultURI, ProvisioningState string }
	}
	for i := 0; i < 100; i++ { // the vault registers, then succeeds
		az(&vault, "rest", "--method", "get", "--url", vaultURL)
		if vault.Properties.ProvisioningState == "Succeeded" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if vault.Properties.VaultURI != "https://kvcliproxy1.vault.azure.net/" || vault.Properties.ProvisioningState != "Succeeded" {
		t.Fatalf("vault: %+v", vault)
	}
	secretURL := vault.Properties.VaultURI + "secrets/db-password?api-version=7.4"
	var set, got struct{ ID, Value string }
	az(&set, "rest", "--method", "put", "--url", secretURL, "--resource", "https://vault.azure.net", "--body", `{"value":"cli-s3cret"}`)
	az(&got, "rest", "--method", "get", "--url", secretURL, "--resource", "https://vault.azure.net")
	if got.Value != "cli-s3cret" || !strings.HasPrefix(set.ID, "https://kvcliproxy1.vault.azure.net/secrets/db-password/") {
		t.Errorf("secret: set %+v, got %+v", set, got)
	}
	// Nothing went anywhere but the cloud: every host the CLI asked for was one of Azure's.
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "Proxy refused") {
			t.Logf("refused: %s", l) // e.g. a version check; the CLI worked without it
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, s.ClientSecret) || strings.Contains(logs, "eyJ") {
		t.Error("the cloud's log holds a secret or a token")
	}
	_ = os.Remove(config)
}
