package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestUpAppliesSamples: right after `up`, `kubectl apply -f config/samples/` works and every
// sample goes Ready: the manager runs in-process with the CRDs installed.
func TestUpAppliesSamples(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	kubeconfig := env["KUBECONFIG"]
	samples, err := filepath.Abs("../../config/samples")
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, kubeconfig, "apply", "-f", samples)
	kinds := "resourcegroups,userassignedidentities,federatedidentitycredentials,roleassignments,vaults,storageaccounts"
	kubectl(t, kubeconfig, "wait", "--for=condition=Ready", "--timeout=3m", kinds, "--all")
	out := kubectl(t, kubeconfig, "get", "azure")
	if strings.Count(out, "True") < 6 || !strings.Contains(out, "SEVERITY") {
		t.Errorf("kubectl get azure:\n%s", out)
	}
	stopAndCheck(t, up, dir, syscall.SIGINT)
}
