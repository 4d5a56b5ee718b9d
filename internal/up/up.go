// Package up runs the whole of Cerulean on one machine: the local control plane and the
// local cloud now, and the manager and the node agent in the same process as they land.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/shellenv"
)

// Options configure Run.
type Options struct {
	// DataDir keeps all state; running again on it resumes.
	DataDir string
	// BinDir holds the control-plane binaries; empty means devenv.DefaultBinDir().
	BinDir string
	// CloudAddr is where the local cloud listens; port 0 picks a free port on every start.
	CloudAddr string
	// Out receives progress and the summary.
	Out io.Writer
	// Node starts the local node (needs root): containerd, the kubelet and kube-scheduler.
	Node bool
	// NodeWait bounds the wait for another node on this machine to stop; 0 fails at once.
	NodeWait time.Duration
}

// EnvFileName is written last, once everything is ready: its presence means "ready".
const EnvFileName = "env"

// Run starts everything, writes DIR/env, and runs until ctx ends or a component fails.
func Run(ctx context.Context, opts Options) error {
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data directory: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}
	envPath := filepath.Join(dataDir, EnvFileName)
	if err := os.Remove(envPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}

	cp, err := devenv.Start(ctx, devenv.Options{DataDir: dataDir, BinDir: opts.BinDir, Progress: opts.Out})
	if err != nil {
		return err
	}
	defer func() {
		// The env file must not outlive what it describes.
		_ = os.Remove(envPath)
		fmt.Fprintln(opts.Out, "stopping…")
		cp.Stop()
	}()

	fmt.Fprintln(opts.Out, "starting the local cloud…")
	cloudLog, err := os.OpenFile(filepath.Join(dataDir, "logs", "cloud.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the local cloud's log: %w", err)
	}
	defer cloudLog.Close()
	az, err := cloud.Start(ctx, cloud.Options{
		Addr:     opts.CloudAddr,
		DataDir:  filepath.Join(dataDir, "cloud"),
		TrustCAs: [][]byte{cp.CACertPEM}, // federated exchange fetches the cluster issuer's keys
		Logger:   slog.New(slog.NewJSONHandler(cloudLog, nil)),
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("start the local cloud: %w (stop whatever holds it, or pass --cloud-addr)", err)
	}
	if err != nil {
		return fmt.Errorf("start the local cloud: %w", err)
	}
	defer az.Close()

	clusterID, issuer, err := registerCluster(ctx, az, cp.IssuerURL)
	if err != nil {
		return err
	}

	var node *devenv.Node
	if opts.Node {
		if node, err = startNode(ctx, cp, az, opts); err != nil {
			return err
		}
		defer func() {
			if err := node.Stop(); err != nil {
				fmt.Fprintln(opts.Out, err)
			}
		}()
	}

	env := append([]string{"KUBECONFIG=" + shellenv.Quote(cp.Kubeconfig)}, az.Env()...)
	env = append(env, "CERULEAN_OIDC_ISSUER="+shellenv.Quote(issuer), "CERULEAN_CLUSTER_ID="+shellenv.Quote(clusterID))
	if err := fsutil.WriteFileAtomic(envPath, []byte(cloud.FormatEnv(env)), 0o600); err != nil {
		return err
	}
	printSummary(opts.Out, cp, az.Settings(), clusterID, envPath, node)

	exited, which := cp.Exited()
	var nodeExited <-chan struct{}
	nodeWhich := func() error { return nil }
	if node != nil {
		nodeExited, nodeWhich = node.Exited()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-exited:
		return which()
	case <-nodeExited:
		return nodeWhich()
	}
}

func printSummary(out io.Writer, cp *devenv.ControlPlane, az cloud.Settings, clusterID, envPath string, node *devenv.Node) {
	nodeLine := "none (--no-node)"
	if node != nil {
		nodeLine = node.Name + " on " + node.IP + " (containerd: " + node.ContainerdSocket + ")"
	}
	fmt.Fprintf(out, `
Cerulean is up.
  kube-apiserver      %s
  issuer (OIDC)       %s
  kubeconfig          %s
  local cloud         %s  (tenant %s, subscription %s)
  cluster (ARM)       %s
  node                %s
  logs                %s

Use it:
  source %s
  bin/kubectl get namespaces

Ctrl-C stops everything; run again with the same --data-dir to resume.
`, cp.APIServerURL, cp.IssuerURL, cp.Kubeconfig, az.URL, az.TenantID, az.SubscriptionID, clusterID, nodeLine, filepath.Join(cp.DataDir, "logs"), envPath)
}
