// Command cerulean is the product: what runs in a cluster (manager, node-agent, csi-provider) and
// what a user runs against Azure (rollout, doctor). It links nothing of the local environment
// (local cloud, control planes, node), which is cmd/cerulean-local; deps_test.go keeps it so.
// Each subcommand lives in its own file.
package main

import (
	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/cli"
)

func main() {
	cli.Main(newRootCommand())
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "cerulean",
		Short:         "Azure identities, resources and Key Vault secrets for Kubernetes workloads",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(cli.NewVersionCommand("cerulean"), newManagerCommand(), newCSIProviderCommand(), newNodeAgentCommand(), newDoctorCommand(), newRolloutCommand(), newImportCommand(), newKMSPluginCommand())
	return root
}
