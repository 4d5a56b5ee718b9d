package up

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/rollout"
	"github.com/cerulean/cerulean/internal/rollout/examplechart"
	"github.com/cerulean/cerulean/internal/rollout/fleet"
)

// MaxClusters bounds Options.Clusters. Each cluster beyond the first is a real control plane of
// its own (etcd, kube-apiserver, kube-controller-manager: about 0.4 GiB of memory, idle); ten is
// the largest fleet the rollout benchmark measures and already holds 4 GiB, more than a laptop
// running other work can spare.
const MaxClusters = 10

// The example rollout of `up --clusters N` (N > 1), written into the data directory.
const (
	// RolloutFileName names every cluster, the shared vault and the example chart.
	RolloutFileName = "rollout.yaml"
	// RolloutChartDir holds the example chart the rollout file deploys.
	RolloutChartDir = "rollout-chart"
	// ClustersDir holds the data directories of clusters 2..N, one per cluster name.
	ClustersDir = "clusters"
	// RolloutVault is the shared vault's name (in the clusters' resource group) and
	// RolloutSecret the secret every cluster's app reads from it.
	RolloutVault  = "cerulean-kv"
	RolloutSecret = "db-password"
	// RolloutNamespace and RolloutServiceAccount are the example app's.
	RolloutNamespace      = "app"
	RolloutServiceAccount = "app"
)

// ClusterName is the name of cluster i (1-based) in the local cloud: cerulean-local for up's own
// cluster, cerulean-local-2, -3… for the others.
func ClusterName(i int) string {
	if i == 1 {
		return clusterName
	}
	return clusterName + "-" + strconv.Itoa(i)
}

// extraCluster is one of clusters 2..N: a control plane without a node.
type extraCluster struct {
	name string
	id   string // ARM id, once registered
	cp   *devenv.ControlPlane
}

// startExtraClusters starts clusters 2..n at once, each in DIR/clusters/NAME, with progress lines
// prefixed by the cluster's name. The caller stops them (devenv.StopPlanes).
func startExtraClusters(ctx context.Context, out io.Writer, dataDir, binDir string, n int) ([]*extraCluster, error) {
	var dirs, names []string
	for i := 2; i <= n; i++ {
		names = append(names, ClusterName(i))
		dirs = append(dirs, filepath.Join(dataDir, ClustersDir, ClusterName(i)))
	}
	fmt.Fprintf(out, "starting %d more clusters (control planes without a node: %s)…\n", n-1, filepath.Join(dataDir, ClustersDir))
	planes, err := devenv.StartPlanes(ctx, devenv.PlanesOptions{DataDirs: dirs, Names: names, BinDir: binDir, Progress: out})
	if err != nil {
		return nil, err
	}
	extras := make([]*extraCluster, len(planes))
	for i, cp := range planes {
		extras[i] = &extraCluster{name: names[i], cp: cp}
	}
	return extras, nil
}

func planesOf(extras []*extraCluster) []*devenv.ControlPlane {
	out := make([]*devenv.ControlPlane, len(extras))
	for i, e := range extras {
		out[i] = e.cp
	}
	return out
}

// registerExtraClusters registers clusters 2..N next to up's own, with the OIDC issuer and
// workload identity on, each bound to its own control plane's issuer.
func registerExtraClusters(ctx context.Context, out io.Writer, az *cloud.Cloud, extras []*extraCluster) error {
	for _, e := range extras {
		fmt.Fprintf(out, "registering %s in the local cloud…\n", e.name)
		id, err := fleet.Register(ctx, az, fleet.Cluster{ResourceGroup: clusterGroup, Name: e.name, Location: clusterLocation, Issuer: e.cp.IssuerURL, OIDCIssuer: true})
		if err != nil {
			return err
		}
		e.id = id
	}
	return nil
}

// writeExampleRollout makes the shared vault with its secret (kept across restarts) and writes
// DIR/rollout-chart and DIR/rollout.yaml, naming every cluster.
func writeExampleRollout(ctx context.Context, out io.Writer, az *cloud.Cloud, dataDir, clusterID, kubeconfig, podProxyURL string, extras []*extraCluster) (string, error) {
	fmt.Fprintf(out, "creating the shared Key Vault %s and the example rollout…\n", RolloutVault)
	value, err := randomSecret()
	if err != nil {
		return "", err
	}
	vault, err := fleet.EnsureVault(ctx, az, fleet.Vault{
		ResourceGroup: clusterGroup, Name: RolloutVault, Location: clusterLocation,
		SecretName: RolloutSecret, SecretValue: value, KeepSecret: true,
	})
	if err != nil {
		return "", err
	}
	chart := filepath.Join(dataDir, RolloutChartDir)
	if err := os.RemoveAll(chart); err != nil {
		return "", fmt.Errorf("write example chart: %w", err)
	}
	if err := examplechart.Write(chart); err != nil {
		return "", err
	}
	ca, err := os.ReadFile(az.Settings().CAFile)
	if err != nil {
		return "", fmt.Errorf("read the local cloud's CA: %w", err)
	}
	clusters := []rollout.Cluster{{ID: clusterID, Kubeconfig: kubeconfig}}
	for _, e := range extras {
		clusters = append(clusters, rollout.Cluster{ID: e.id, Kubeconfig: e.cp.Kubeconfig})
	}
	values := map[string]any{
		// The app reads the secret every 30 s and prints one line per read. Only up's own
		// cluster has a node to run it; the others' pods stay Pending, and the rollout's verify
		// step proves their identities without a pod. The cloud's CA is private.
		"args": []any{}, "readEvery": "30s", "cloudCA": string(ca),
		// On the pod network, the app reaches Entra ID and the vault under Azure's names through
		// the cloud's proxy for pods, as it would reach Azure.
		"env": []any{
			map[string]any{"name": "HTTPS_PROXY", "value": podProxyURL},
			map[string]any{"name": "NO_PROXY", "value": podNoProxy},
			map[string]any{"name": "AZURE_AUTHORITY_HOST", "value": azurenames.AuthorityHost},
		},
		"vault": map[string]any{"url": "https://" + RolloutVault + azurenames.VaultSuffix + "/", "secret": RolloutSecret},
	}
	if podProxyURL == "" {
		// No proxy on a node's address: the app can only reach the cloud on loopback.
		delete(values, "env")
		values["hostNetwork"] = true
		values["vault"] = map[string]any{"url": vault.URI, "secret": RolloutSecret}
	}
	path := filepath.Join(dataDir, RolloutFileName)
	err = fleet.WriteRolloutFile(path, rollout.Config{
		Clusters: clusters,
		KeyVault: rollout.KeyVault{ID: vault.ID, VerifySecret: RolloutSecret},
		Role:     "Key Vault Secrets User",
		Identity: rollout.Identity{Suffix: "-app"},
		App: rollout.App{
			Chart:  chart,
			Values: values,
		},
		Namespace:      RolloutNamespace,
		ServiceAccount: RolloutServiceAccount,
	})
	if err != nil {
		return "", err
	}
	return path, nil
}

func randomSecret() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate the example secret: %w", err)
	}
	return "s3cr3t-" + hex.EncodeToString(b), nil
}

// exitedOf is closed when a component of any cluster's control plane exits on its own; which
// tells which one and why.
func exitedOf(cp *devenv.ControlPlane, extras []*extraCluster) (<-chan struct{}, func() error) {
	ch, which := cp.Exited()
	if len(extras) == 0 {
		return ch, which
	}
	all := make(chan struct{})
	whiches := []func() error{which}
	chans := []<-chan struct{}{ch}
	for _, e := range extras {
		c, w := e.cp.Exited()
		chans = append(chans, c)
		whiches = append(whiches, func() error {
			if err := w(); err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			return nil
		})
	}
	var once sync.Once
	for _, c := range chans {
		go func() {
			<-c
			once.Do(func() { close(all) })
		}()
	}
	return all, func() error {
		for _, w := range whiches {
			if err := w(); err != nil {
				return err
			}
		}
		return nil
	}
}

// clustersSummary lists every cluster with its ARM id and kubeconfig, and how to roll out to them.
func clustersSummary(clusterID, kubeconfig string, node bool, extras []*extraCluster, rolloutPath, envPath string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Clusters (%d):\n", len(extras)+1)
	pods := "(the node runs its pods)"
	if !node {
		pods = "(no node: pods stay Pending)"
	}
	fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", clusterName, clusterID, kubeconfig, pods)
	for _, e := range extras {
		fmt.Fprintf(w, "  %s\t%s\t%s\t(no node: pods stay Pending)\n", e.name, e.id, e.cp.Kubeconfig)
	}
	_ = w.Flush()
	fmt.Fprintf(&b, `
Roll out the example chart to all of them (shared vault %s, secret %s, chart %s):
  source %s
  cerulean rollout -f %s

`, RolloutVault, RolloutSecret, filepath.Join(filepath.Dir(rolloutPath), RolloutChartDir), envPath, rolloutPath)
	return b.String()
}
