// Package up runs the whole of Cerulean on one machine: the local control plane and the
// local cloud, the manager, and, with the local node, the node agent, in the same process.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/store"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
	"github.com/cerulean/cerulean/internal/shellenv"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// Options configure Run.
type Options struct {
	// DataDir keeps all state; running again on it resumes.
	DataDir string
	// BinDir holds the control-plane binaries; empty means devenv.DefaultBinDir().
	BinDir string
	// CloudAddr is where the local cloud listens; port 0 picks a free port on every start.
	CloudAddr string
	// ProxyAddr is where the cloud's forward proxy for Azure's public names listens ("0": a
	// free port on every start); empty runs none.
	ProxyAddr string
	// Out receives progress and the summary.
	Out io.Writer
	// Node starts the local node (needs root): containerd, the kubelet and kube-scheduler.
	Node bool
	// NodeWait bounds the wait for another node on this machine to stop; 0 fails at once.
	NodeWait time.Duration
	// Clusters is the number of clusters, 1 to MaxClusters: up's own, then control planes
	// without a node (DIR/clusters/NAME), each registered in the local cloud as a managed
	// cluster bound to its own issuer. With more than one, up also writes an example rollout
	// (DIR/rollout.yaml) naming them all.
	Clusters int
	// NoManager leaves out the in-cluster components up otherwise runs in-process (the manager
	// with its CRDs and webhook configurations, the node agent, the CSI provider), so that the
	// Helm chart installs them as it does on AKS: the chart's objects have the fixed names
	// up's would take. The Secrets Store CSI Driver still runs on the node, as AKS's add-on.
	NoManager bool
	// KMS has kube-apiserver encrypt Secrets with a key of the local cloud's Key Vault through
	// cerulean's KMS plugin (KMSVault/KMSKey), as a hosted control plane's kms component does.
	KMS bool
}

// EnvFileName is written last, once everything is ready: its presence means "ready".
const EnvFileName = "env"

// ProxyEnvFileName holds what a client that keeps Azure's public names needs (the cloud's
// proxy, its CA, the bootstrap principal), as `cerulean-local cloud env --proxy` prints it.
const ProxyEnvFileName = "proxy.env"

// PodEnvFileName holds, with the local node, what a pod needs to reach the cloud under Azure's
// public names: the proxy on the node's address (pods do not reach loopback) and the CA to mount.
const PodEnvFileName = "pod.env"

// Run starts everything, writes DIR/env, and runs until ctx ends or a component fails.
func Run(ctx context.Context, opts Options) error {
	if opts.Clusters < 1 || opts.Clusters > MaxClusters {
		return fmt.Errorf("--clusters %d: run 1 to %d clusters (each one beyond the first is a control plane of its own, about 0.4 GiB of memory)", opts.Clusters, MaxClusters)
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data directory: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}
	envPath, proxyEnvPath, podEnvPath := filepath.Join(dataDir, EnvFileName), filepath.Join(dataDir, ProxyEnvFileName), filepath.Join(dataDir, PodEnvFileName)
	rolloutPath := filepath.Join(dataDir, RolloutFileName)
	for _, p := range []string{envPath, proxyEnvPath, podEnvPath, rolloutPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
		}
	}

	// The cloud starts first: with --kms, kube-apiserver needs its Key Vault. It trusts the
	// cluster's CA, made ahead, to fetch the issuer's keys in federated exchanges.
	clusterCA, err := devenv.EnsureCA(dataDir)
	if err != nil {
		return err
	}
	var extras []*extraCluster
	trust := [][]byte{clusterCA}
	if opts.Clusters > 1 {
		if extras, err = startExtraClusters(ctx, opts.Out, dataDir, opts.BinDir, opts.Clusters); err != nil {
			return err
		}
		defer devenv.StopPlanes(planesOf(extras))
		for _, e := range extras {
			trust = append(trust, e.cp.CACertPEM)
		}
	}

	fmt.Fprintln(opts.Out, "starting the local cloud…")
	if err := os.MkdirAll(filepath.Join(dataDir, "logs"), 0o750); err != nil {
		return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}
	cloudLog, err := os.OpenFile(filepath.Join(dataDir, "logs", "cloud.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the local cloud's log: %w", err)
	}
	defer cloudLog.Close()
	az, err := cloud.Start(ctx, cloud.Options{
		Addr:      opts.CloudAddr,
		ProxyAddr: opts.ProxyAddr,
		DataDir:   filepath.Join(dataDir, "cloud"),
		TrustCAs:  trust,
		Logger:    slog.New(slog.NewJSONHandler(cloudLog, nil)),
		EngineNet: engineNet(opts.Node),
	})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("data directory %s is in use by another cerulean process (its local cloud's state is locked): %w", dataDir, err)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("start the local cloud: %w (stop whatever holds it, or pass --cloud-addr or --proxy-addr)", err)
	}
	if err != nil {
		return fmt.Errorf("start the local cloud: %w", err)
	}
	defer az.Close()

	encryption := ""
	if opts.KMS {
		fmt.Fprintf(opts.Out, "starting the KMS plugin (Secrets encrypted with Key Vault key %s/%s)…\n", KMSVault, KMSKey)
		kmsCtx, stopKMS := context.WithCancel(ctx)
		var kmsDone <-chan error
		if encryption, kmsDone, err = startKMS(kmsCtx, az, dataDir); err != nil {
			stopKMS()
			return err
		}
		defer func() { // after kube-apiserver stops
			stopKMS()
			if err := <-kmsDone; err != nil {
				fmt.Fprintln(opts.Out, err)
			}
		}()
	}
	cp, err := devenv.Start(ctx, devenv.Options{DataDir: dataDir, BinDir: opts.BinDir, Progress: opts.Out, EncryptionConfig: encryption})
	if err != nil {
		return err
	}
	defer func() {
		// The env files must not outlive what they describe.
		_ = os.Remove(envPath)
		_ = os.Remove(proxyEnvPath)
		_ = os.Remove(podEnvPath)
		_ = os.Remove(rolloutPath)
		_ = os.RemoveAll(filepath.Join(dataDir, RolloutChartDir))
		fmt.Fprintln(opts.Out, "stopping…")
		cp.Stop()
	}()

	clusterID, issuer, err := registerCluster(ctx, az, clusterName, cp.IssuerURL)
	if err != nil {
		return err
	}
	if err := registerExtraClusters(ctx, opts.Out, az, extras); err != nil {
		return err
	}

	var node *devenv.Node
	var providerID string
	if opts.Node {
		if node, providerID, err = startNode(ctx, cp, az, opts); err != nil {
			return err
		}
		defer func() {
			if err := node.Stop(); err != nil {
				fmt.Fprintln(opts.Out, err)
			}
		}()
	}
	var managerDone <-chan error
	var managerMetrics string
	if opts.NoManager {
		fmt.Fprintln(opts.Out, "no manager, node agent or CSI provider (--no-manager): install the chart (docs/install.md)")
		if err := writeClusterConfigMaps(ctx, cp, az); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(opts.Out, "starting the manager…")
		mgrCtx, stopManager := context.WithCancel(ctx)
		defer stopManager()
		var wi workloadidentity.Config
		if node != nil {
			wi = proxyImages(opts.BinDir)
		}
		if managerDone, managerMetrics, err = startManager(mgrCtx, cp, az, dataDir, wi); err != nil {
			return err
		}
	}
	// The agent watches pod identity's CRDs, which the manager's start installed.
	var agent *nodeAgent
	if node != nil && !opts.NoManager {
		fmt.Fprintln(opts.Out, "starting the node agent…")
		if agent, err = startNodeAgent(ctx, cp, az, node, providerID, dataDir); err != nil {
			return err
		}
		defer func() {
			if err := agent.Stop(); err != nil {
				fmt.Fprintln(opts.Out, err)
			}
		}()
	}

	podIdentityEndpoint := ""
	var nodeIMDS *nodeagent.IMDSSource
	if agent != nil {
		podIdentityEndpoint = "http://" + agent.addr
		if nodeIMDS, err = scaleSetIMDS(az, providerID); err != nil {
			return fmt.Errorf("start the CSI provider: %w", err)
		}
	}
	csiSocket := ""
	if !opts.NoManager {
		csi, socket, csiLog, err := startCSIProvider(dataDir, az.Settings(), podIdentityEndpoint, nodeIMDS)
		if err != nil {
			return err
		}
		defer csiLog.Close()
		defer func() { _ = csi.Close() }()
		csiSocket = socket
	}
	if node != nil {
		fmt.Fprintln(opts.Out, "starting the Secrets Store CSI Driver…")
		driver, err := startCSIDriver(ctx, node, dataDir)
		if err != nil {
			return err
		}
		defer func() {
			if err := driver.Stop(); err != nil {
				fmt.Fprintln(opts.Out, err)
			}
		}()
	}

	podProxyURL := ""
	if node != nil && az.Proxy() != nil {
		if podProxyURL, err = servePodProxy(az, node, podEnvPath); err != nil {
			return err
		}
		if err := serveAzureNames(az); err != nil {
			return err
		}
	}
	if az.Proxy() != nil {
		proxyEnv := append([]string{"KUBECONFIG=" + shellenv.Quote(cp.Kubeconfig)}, az.ProxyEnv()...)
		if err := fsutil.WriteFileAtomic(proxyEnvPath, []byte(cloud.FormatEnv(proxyEnv)), 0o600); err != nil {
			return err
		}
	}
	if len(extras) > 0 {
		if _, err := writeExampleRollout(ctx, opts.Out, az, dataDir, clusterID, cp.Kubeconfig, podProxyURL, extras); err != nil {
			return err
		}
	}
	env := append([]string{"KUBECONFIG=" + shellenv.Quote(cp.Kubeconfig)}, az.Env()...)
	env = append(env, "CERULEAN_OIDC_ISSUER="+shellenv.Quote(issuer), "CERULEAN_CLUSTER_ID="+shellenv.Quote(clusterID))
	if managerMetrics != "" {
		env = append(env, "CERULEAN_MANAGER_METRICS_URL="+shellenv.Quote(managerMetrics))
	}
	if agent != nil {
		env = append(env, "CERULEAN_NODE_AGENT_METRICS_URL="+shellenv.Quote(agent.metrics))
	}
	if csiSocket != "" {
		env = append(env, "CERULEAN_CSI_PROVIDER_SOCKET="+shellenv.Quote(csiSocket))
	}
	if err := fsutil.WriteFileAtomic(envPath, []byte(cloud.FormatEnv(env)), 0o600); err != nil {
		return err
	}
	clusters := ""
	if len(extras) > 0 {
		clusters = clustersSummary(clusterID, cp.Kubeconfig, node != nil, extras, rolloutPath, envPath)
	}
	printSummary(opts.Out, cp, az.Settings(), clusterID, envPath, podProxyURL, node, agent, managerMetrics, clusters)

	exited, which := exitedOf(cp, extras)
	var nodeExited, agentExited <-chan struct{}
	nodeWhich := func() error { return nil }
	if node != nil {
		nodeExited, nodeWhich = node.Exited()
	}
	if agent != nil {
		agentExited = agent.Exited()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-exited:
		return which()
	case err := <-managerDone:
		return fmt.Errorf("manager stopped: %w", err)
	case <-nodeExited:
		return nodeWhich()
	case <-agentExited:
		if agent.err != nil {
			return fmt.Errorf("node agent stopped: %w", agent.err)
		}
		return errors.New("node agent stopped")
	}
}

func printSummary(out io.Writer, cp *devenv.ControlPlane, az cloud.Settings, clusterID, envPath, podProxyURL string, node *devenv.Node, agent *nodeAgent, managerMetrics, clusters string) {
	proxyLine := ""
	if az.ProxyURL != "" {
		proxyLine = fmt.Sprintf("  proxy               %s  (Azure's public names; source %s)\n",
			az.ProxyURL, filepath.Join(filepath.Dir(envPath), ProxyEnvFileName))
	}
	if podProxyURL != "" {
		proxyLine += fmt.Sprintf("  proxy for pods      %s  (see %s)\n", podProxyURL, filepath.Join(filepath.Dir(envPath), PodEnvFileName))
		proxyLine += fmt.Sprintf("  DNS for pods        CoreDNS at %s (cluster.local; Azure's names: the cloud at %s, HTTPS on %s)\n",
			devenv.DNSServiceIP, devenv.CloudDNSAddr, devenv.CloudHTTPSAddr)
	}
	nodeLine := "none (--no-node)"
	agentLine := "not running (no node)"
	if node != nil {
		nodeLine = node.Name + " on " + node.IP + " (containerd: " + node.ContainerdSocket + ")"
	}
	if agent != nil {
		agentLine = agent.addr + " (pods' " + nodeagent.MetadataIP + ":80 on " + devenv.Bridge + "; pod identity; metrics " + agent.metrics + ")"
	} else if node != nil {
		agentLine = "not running (--no-manager: the chart's nodeAgent.enabled)"
	}
	managerLine := "not running (--no-manager)"
	if managerMetrics != "" {
		managerLine = "in this process (metrics " + managerMetrics + ")"
	}
	fmt.Fprintf(out, `
Cerulean is up.
  kube-apiserver      %s
  issuer (OIDC)       %s
  kubeconfig          %s
  local cloud         %s  (tenant %s, subscription %s)
  web view            %s  (log in: %slogin?token=$(cat %s))
  cluster (ARM)       %s
%s  manager             %s
  node                %s
  node agent          %s
  logs                %s

Use it:
  source %s
  bin/kubectl get namespaces

%sCtrl-C stops everything; run again with the same --data-dir to resume.
`, cp.APIServerURL, cp.IssuerURL, cp.Kubeconfig, az.URL, az.TenantID, az.SubscriptionID, az.WebViewURL, az.WebViewURL, az.WebViewTokenFile, clusterID, proxyLine, managerLine, nodeLine, agentLine, filepath.Join(cp.DataDir, "logs"), envPath, clusters)
}

// engineNet is where the cloud's engines take their addresses: with a node, on a network its
// pods reach (devenv.EngineCIDR), so a pod connects to NAME.postgres.database.azure.com as the
// cloud's DNS answers it; without one, loopback addresses, which need no root.
func engineNet(node bool) netip.Prefix {
	if !node {
		return netip.Prefix{}
	}
	return netip.MustParsePrefix(devenv.EngineCIDR)
}
