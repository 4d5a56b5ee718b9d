package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/up"
)

func newUpCommand() *cobra.Command {
	opts := up.Options{Clusters: 1}
	var node, noNode bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole system on this machine until interrupted",
		Long: `Starts a real local control plane (etcd, kube-apiserver, kube-controller-manager), the
local cloud, the manager and, as root, a real node (containerd, kubelet, kube-scheduler) that
runs pods; writes DIR/kubeconfig and, once everything is ready, DIR/proxy.env (for clients that
keep Azure's public names and use the cloud's proxy) and DIR/env.

With --clusters N, clusters 2..N are more control planes without a node (etcd,
kube-apiserver, kube-controller-manager in DIR/clusters/NAME, kubeconfig there), each
registered in the local cloud as a managed cluster bound to its own issuer; up then also
creates a shared Key Vault with a secret and writes DIR/rollout.yaml, a rollout of an
example chart to every cluster: source DIR/env, then cerulean rollout -f DIR/rollout.yaml.

With --no-manager, up runs none of Cerulean's in-cluster components (manager, CRDs and webhook
configurations, node agent, CSI provider): install the Helm chart instead, as on AKS
(docs/install.md).

With --kms, kube-apiserver encrypts Secrets with the key etcd of the local Key Vault
cerulean-kms through cerulean's KMS v2 plugin (docs/control-plane-identities.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node && noNode {
				return errors.New("--node and --no-node contradict each other")
			}
			opts.Node = os.Geteuid() == 0 && !noNode || node
			opts.Out = cmd.OutOrStdout()
			return up.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&node, "node", false, "run the local node (the default as root; needs root)")
	cmd.Flags().BoolVar(&noNode, "no-node", false, "run without the local node (no pods run)")
	cmd.Flags().BoolVar(&opts.NoManager, "no-manager", false, "run without the in-process manager, node agent and CSI provider, to install the Helm chart instead")
	cmd.Flags().BoolVar(&opts.KMS, "kms", false, "encrypt Secrets in etcd with a key of the local Key Vault (cerulean kms-plugin, as a hosted control plane's kms component)")
	cmd.Flags().DurationVar(&opts.NodeWait, "node-wait", 0, "how long to wait for another cerulean's node on this machine to stop (0: fail at once)")
	cmd.Flags().StringVar(&opts.DataDir, "data-dir", ".cerulean", "directory for all state; running again on it resumes")
	cmd.Flags().StringVar(&opts.CloudAddr, "cloud-addr", "127.0.0.1:8443", "address of the local cloud (port 0: a free port on every start)")
	cmd.Flags().StringVar(&opts.ProxyAddr, "proxy-addr", cloud.DefaultProxyAddr, "the local cloud's forward proxy for Azure's public names (0: a free port on every start)")
	cmd.Flags().IntVar(&opts.Clusters, "clusters", 1, fmt.Sprintf("number of clusters, 1 to %d: the others are control planes without a node, and DIR/rollout.yaml rolls out to all", up.MaxClusters))
	cmd.Flags().StringVar(&opts.BinDir, "bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager (default: next to this binary)")
	return cmd
}
