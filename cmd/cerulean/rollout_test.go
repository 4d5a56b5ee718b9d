package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `cerulean rollout --dry-run` prints the plan from the file alone; without -f it refuses.
func TestRolloutCommandDryRun(t *testing.T) {
	dir := t.TempDir()
	chart, err := filepath.Abs(filepath.Join("..", "..", "internal", "rollout", "examplechart", "app"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "rollout.yaml")
	if err := os.WriteFile(file, []byte(`
clusters:
  - id: /subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks-east
keyVault:
  id: /subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv
role: Key Vault Secrets User
app:
  chart: `+chart+`
namespace: app
serviceAccount: app
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"rollout", "-f", file, "--dry-run"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"aks-east (", "create or reuse identity aks-east in resource group rg", "system:serviceaccount:app:app"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
	cmd = newRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"rollout", "revoke", "-f", file})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "cluster") {
		t.Errorf("revoke without --cluster: %v", err)
	}
}
