package main

import (
	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/up"
)

func newUpCommand() *cobra.Command {
	opts := up.Options{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole system on this machine until interrupted",
		Long: `Starts a real local control plane (etcd, kube-apiserver, kube-controller-manager) and the
local cloud, writes DIR/kubeconfig and, once everything is ready, DIR/proxy.env (for clients
that keep Azure's public names and use the cloud's proxy) and DIR/env.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			return up.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DataDir, "data-dir", ".cerulean", "directory for all state; running again on it resumes")
	cmd.Flags().StringVar(&opts.CloudAddr, "cloud-addr", "127.0.0.1:8443", "address of the local cloud (port 0: a free port on every start)")
	cmd.Flags().StringVar(&opts.ProxyAddr, "proxy-addr", cloud.DefaultProxyAddr, "the local cloud's forward proxy for Azure's public names (0: a free port on every start)")
	cmd.Flags().StringVar(&opts.BinDir, "bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager (default: next to this binary)")
	return cmd
}
