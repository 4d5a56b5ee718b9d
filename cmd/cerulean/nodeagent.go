package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

func newNodeAgentCommand() *cobra.Command {
	opts := nodeagent.CommandOptions{}
	cmd := &cobra.Command{
		Use:   "node-agent",
		Short: "Answer pods' IMDS token requests with their bound identity (aad-pod-identity's NMI; one per node)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return nodeagent.RunCommand(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node served ($NODE_NAME)")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig; empty uses the in-cluster config or $KUBECONFIG")
	f.StringVar(&opts.Listen, "listen", "0.0.0.0:2579", "address served")
	f.StringVar(&opts.NodeIP, "node-ip", os.Getenv("NODE_IP"), "node address pods' IMDS traffic is DNATed to ($NODE_IP)")
	f.StringSliceVar(&opts.PodInterfaces, "pod-interfaces", []string{"cni0"}, "interfaces pods' traffic arrives on (names, or prefixes ending in '+': cni0,veth+); empty installs no DNAT rules")
	f.StringVar(&opts.Table, "nft-table", nodeagent.DefaultTable, "the agent's own nftables table (family ip) holding its DNAT rules")
	f.BoolVar(&opts.KeepRulesOnExit, "keep-rules-on-exit", false, "leave the DNAT rules when the agent exits: pods' IMDS requests fail until the next agent starts instead of reaching the node's IMDS (delete them with: nft delete table ip TABLE)")
	f.StringVar(&opts.IMDSEndpoint, "imds-endpoint", "http://169.254.169.254", "the node's managed-identity endpoint (the local cloud's URL for a local node)")
	f.StringVar(&opts.IdentityHeaderFile, "identity-header-file", "", "file with the local cloud's identity header of the node's VM or scale set")
	f.StringVar(&opts.CAFile, "ca-file", "", "CA bundle of the managed-identity endpoint and of Entra ID (local cloud)")
	f.StringVar(&opts.AuthorityHost, "authority-host", os.Getenv("AZURE_AUTHORITY_HOST"), "Entra ID for service-principal identities (types 1, 2; $AZURE_AUTHORITY_HOST; empty: Azure's public cloud)")
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "0.0.0.0:9090", "address of the Prometheus metrics (/metrics; aad-pod-identity NMI's port); empty turns them off")
	f.DurationVar(&opts.AssignWait, "assign-wait", 0, "how long a request waits for its identity to be assigned (default 20s)")
	return cmd
}
