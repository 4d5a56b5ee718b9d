package rollout_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/rollout"
	"github.com/cerulean/cerulean/internal/rollout/rollouttest"
)

const (
	goodCluster = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks-east"
	goodVault   = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/shared/providers/Microsoft.KeyVault/vaults/shared-kv"
)

func validFile() string {
	return `
clusters:
  - id: ` + goodCluster + `
    kubeconfig: east.kubeconfig
  - id: ` + strings.Replace(goodCluster, "aks-east", "aks-west", 1) + `
    context: west
keyVault:
  id: ` + goodVault + `
  verifySecret: db-password
role: Key Vault Secrets User
app:
  chart: ` + rollouttest.ChartDir() + `
namespace: app
serviceAccount: app
`
}

func TestParseDefaultsAndPaths(t *testing.T) {
	cfg, err := rollout.Parse([]byte(validFile()), "/etc/rollout")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Audience != rollout.DefaultAudience || cfg.App.ClientIDValue != rollout.DefaultClientIDValue {
		t.Errorf("defaults: audience %q, clientIdValue %q", cfg.Audience, cfg.App.ClientIDValue)
	}
	if cfg.Clusters[0].Kubeconfig != "/etc/rollout/east.kubeconfig" {
		t.Errorf("kubeconfig %q, want it relative to the file", cfg.Clusters[0].Kubeconfig)
	}
	if cfg.Clusters[1].Name() != "aks-west" || cfg.IdentityName(cfg.Clusters[1]) != "aks-west" {
		t.Errorf("cluster name %q, identity %q", cfg.Clusters[1].Name(), cfg.IdentityName(cfg.Clusters[1]))
	}
	if got := cfg.Subject(cfg.Clusters[0]); got != "system:serviceaccount:app:app" {
		t.Errorf("subject %q", got)
	}
}

// Every refusal names the field at fault.
func TestParseRefusesWithTheField(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, field string
	}{
		{"no clusters", "clusters:", "clusterz:", "unknown field"},
		{"cluster id not a cluster", goodCluster, goodVault, "clusters[0].id"},
		{"cluster id not an id", goodCluster, "aks-east", "clusters[0].id"},
		{"duplicate cluster name", "aks-west", "aks-east", "clusters[1].id"},
		{"vault id not a vault", "  id: " + goodVault, "  id: " + goodCluster, "keyVault.id"},
		{"no role", "role: Key Vault Secrets User", "", "role"},
		{"role id of another type", "role: Key Vault Secrets User", "role: " + goodVault, "role"},
		{"chart missing", "chart: " + rollouttest.ChartDir(), "chart: /nonexistent/chart", "app.chart"},
		{"bad namespace", "namespace: app", "namespace: App_1", "namespace"},
		{"no service account", "serviceAccount: app", "", "serviceAccount"},
		{"bad cluster namespace", "context: west", "context: west\n    namespace: -x", "clusters[1].namespace"},
		{"bad values path", "app:\n", "app:\n  clientIdValue: a..b\n", "app.clientIdValue"},
		{"unknown field", "namespace: app", "namespace: app\nparallel: 3", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := strings.Replace(validFile(), tc.from, tc.to, 1)
			if file == validFile() {
				t.Fatalf("the case changes nothing")
			}
			_, err := rollout.Parse([]byte(file), "/tmp")
			if !errors.Is(err, rollout.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err = %v, want %v naming %s", err, rollout.ErrInvalidConfig, tc.field)
			}
		})
	}
}

func TestAssignmentNameIsStable(t *testing.T) {
	a := rollout.AssignmentName(goodVault, "/x/roleDefinitions/4633458b-17de-408a-b874-0445c86b69e6", "p1")
	if a != rollout.AssignmentName(strings.ToUpper(goodVault), "/x/roleDefinitions/4633458b-17de-408a-b874-0445c86b69e6", "P1") {
		t.Error("the name depends on case")
	}
	if a == rollout.AssignmentName(goodVault, "/x/roleDefinitions/4633458b-17de-408a-b874-0445c86b69e6", "p2") {
		t.Error("two principals share a name")
	}
}

// The file shown in docs/rollout.md parses as documented.
func TestDocumentedFileParses(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "rollout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		if strings.HasPrefix(body, "clusters:") {
			block = body
		}
	}
	if block == "" {
		t.Fatal("no ```yaml block starting with clusters: in docs/rollout.md")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rollouttest.ChartDir(), filepath.Join(dir, "charts", "payments")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values-prod.yaml"), []byte("replicas: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := rollout.Parse([]byte(block), dir)
	if err != nil {
		t.Fatalf("the documented file: %v", err)
	}
	if len(cfg.Clusters) != 2 || cfg.IdentityName(cfg.Clusters[1]) != "aks-west-payments" || cfg.Subject(cfg.Clusters[1]) != "system:serviceaccount:payments-west:payments" {
		t.Errorf("documented file read as %+v", cfg)
	}
}

// Parse never panics and either refuses with ErrInvalidConfig or returns a configuration whose
// clusters all have names.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validFile()))
	f.Add([]byte("clusters: [{id: x}]"))
	f.Add([]byte("{}"))
	f.Add([]byte("clusters:\n  - id: /subscriptions/s/resourceGroups/r/providers/Microsoft.ContainerService/managedClusters/" + strings.Repeat("a", 300)))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := rollout.Parse(b, t.TempDir())
		if err != nil {
			if !errors.Is(err, rollout.ErrInvalidConfig) && !strings.Contains(err.Error(), "rollout file") {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		for _, c := range cfg.Clusters {
			if c.Name() == "" {
				t.Fatalf("a cluster without a name was accepted: %+v", c)
			}
		}
	})
}
