package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cerulean/cerulean/internal/rollout"
	cerup "github.com/cerulean/cerulean/internal/up"
)

// `cerulean-local up --clusters 3`, then `cerulean rollout -f DIR/rollout.yaml` with DIR/env as the
// environment, as docs/rollout.md tells a user: up prints each cluster's ARM id and kubeconfig,
// each cluster is bound in the local cloud to its own control plane's issuer, and the example
// rollout up wrote converges all three (verify reads the vault secret with each cluster's own
// identity). With the real node, up's own cluster runs the app: its pod, mutated by the
// in-cluster webhook, reads the secret with the identity the rollout made (the Azure SDK's
// DefaultAzureCredential in the test-app image, through the projected token); the other clusters
// have no node, their pods stay Pending. A second run changes nothing, and a Ctrl-C of up stops
// every cluster's processes and removes the example rollout.
func TestRolloutToUpsClustersRunsTheApp(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--clusters", "3")
	env := waitForEnv(t, up, dir)
	ctx := t.Context()
	kubeconfigs := []string{env["KUBECONFIG"], filepath.Join(dir, "clusters", "cerulean-local-2", "kubeconfig"), filepath.Join(dir, "clusters", "cerulean-local-3", "kubeconfig")}

	// Each cluster: its ARM id and kubeconfig in up's summary, and ARM reports as its issuer
	// the API server its kubeconfig names (its own control plane's), different for each.
	opts := clientOptions(t, env)
	admin, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := armcontainerservice.NewManagedClustersClient(env["AZURE_SUBSCRIPTION_ID"], admin, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	issuers := map[string]bool{}
	for i, kc := range kubeconfigs {
		name := cerup.ClusterName(i + 1)
		id := "/subscriptions/" + env["AZURE_SUBSCRIPTION_ID"] + "/resourceGroups/cerulean/providers/Microsoft.ContainerService/managedClusters/" + name
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +` + regexp.QuoteMeta(id) + ` +` + regexp.QuoteMeta(kc) + ` `).MatchString(up.output.String()) {
			t.Errorf("up's summary does not list %s with its id %s and kubeconfig %s:\n%s", name, id, kc, up.output.String())
		}
		mc, err := clusters.Get(ctx, "cerulean", name, nil)
		if err != nil {
			t.Fatalf("get cluster %s: %v", name, err)
		}
		server := kubectl(t, kc, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")
		if p := mc.Properties; p == nil || p.OidcIssuerProfile == nil || p.OidcIssuerProfile.IssuerURL == nil || *p.OidcIssuerProfile.IssuerURL != server {
			t.Errorf("cluster %s: ARM's issuer is not its control plane's %s: %+v", name, server, mc.Properties)
		}
		issuers[server] = true
	}
	if len(issuers) != 3 {
		t.Errorf("three clusters with %d different issuers, want 3", len(issuers))
	}

	// The secret up put into the shared vault, read by its owner (up's bootstrap principal).
	path := filepath.Join(dir, cerup.RolloutFileName)
	cfg, err := rollout.Load(path)
	if err != nil {
		t.Fatalf("up's example rollout: %v", err)
	}
	if len(cfg.Clusters) != 3 {
		t.Fatalf("up's example rollout names %d clusters, want 3", len(cfg.Clusters))
	}
	// The app reaches the vault under its public name; this test, on the machine, at the URI
	// ARM gives.
	vaults, err := armkeyvault.NewVaultsClient(env["AZURE_SUBSCRIPTION_ID"], admin, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	vault, err := vaults.Get(ctx, "cerulean", cerup.RolloutVault, nil)
	if err != nil || vault.Properties == nil || vault.Properties.VaultURI == nil {
		t.Fatalf("get the shared vault: %v", err)
	}
	got, err := secretsClient(t, *vault.Properties.VaultURI, admin, opts).GetSecret(ctx, cerup.RolloutSecret, "", nil)
	if err != nil || got.Value == nil {
		t.Fatalf("read the example secret as the vault's owner: %v", err)
	}
	secretValue := *got.Value

	getenv := func(k string) string { return env[k] }
	var table bytes.Buffer
	if err := rollout.RunCLI(ctx, rollout.CLIOptions{File: path, Getenv: getenv, Out: &table, Progress: &table}); err != nil {
		t.Fatalf("rollout: %v\n%s", err, table.String())
	}
	t.Logf("rollout:\n%s", table.String())
	for i := range kubeconfigs {
		// The issuer is on already (up registers the clusters as a user of workload identity
		// has them); everything else is new, and verify reads the secret.
		if line := tableLine(t, table.String(), cerup.ClusterName(i+1)); line != cerup.ClusterName(i+1)+" done changed changed changed changed done" {
			t.Errorf("first run: %q, want the identity, credential, role and release made and verify done", line)
		}
	}

	if hasNode(t) {
		// The app's pod on up's own cluster, on the pod network: mutated by the in-cluster
		// webhook, it reads the secret (every 30 s, the example's readEvery) under the vault's
		// public name through the cloud's proxy for pods.
		cs := clientset(t, kubeconfigs[0])
		var logs string
		err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(cerup.RolloutNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
			if err != nil || len(pods.Items) == 0 {
				return false, nil
			}
			p := pods.Items[0]
			if !mutated(p) {
				t.Fatalf("the app's pod was not mutated: %+v", p.Spec.Containers[0].Env)
			}
			if p.Spec.HostNetwork {
				t.Fatal("the app's pod runs on the host's network; the example rollout puts it on the pod network")
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return false, nil
			}
			out, err := cs.CoreV1().Pods(cerup.RolloutNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			logs = string(out)
			return err == nil && strings.Contains(logs, "read secret"), nil
		})
		if err != nil {
			t.Fatalf("the app's pod did not read the secret: %v\n%s", err, logs)
		}
		secretReadLine(t, logs, cerup.RolloutSecret, secretValue)
	}

	// Converged: a second run finds every step done.
	table.Reset()
	if err := rollout.RunCLI(ctx, rollout.CLIOptions{File: path, Getenv: getenv, Out: &table}); err != nil {
		t.Fatalf("second rollout: %v\n%s", err, table.String())
	}
	for i := range kubeconfigs {
		if line := tableLine(t, table.String(), cerup.ClusterName(i+1)); line != cerup.ClusterName(i+1)+" done done done done done done" {
			t.Errorf("second run: %q, want every step done", line)
		}
	}
	if strings.Contains(table.String(), secretValue) {
		t.Error("the secret's value reached the rollout's output")
	}

	stopAndCheck(t, up, dir, syscall.SIGINT) // no process of any cluster is left
	for _, f := range []string{cerup.RolloutFileName, cerup.RolloutChartDir} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still present after up stopped: %v", f, err)
		}
	}
}

// tableLine is the row of cluster name in rollout's table, fields joined by single spaces.
func tableLine(t *testing.T, table, name string) string {
	t.Helper()
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return strings.Join(f, " ")
		}
	}
	t.Fatalf("no row for %s in:\n%s", name, table)
	return ""
}

// mutated reports whether the workload identity webhook gave the pod its token file.
func mutated(p corev1.Pod) bool {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == "AZURE_FEDERATED_TOKEN_FILE" {
			return true
		}
	}
	return false
}
