// Command cerulean-local is the local environment: `cloud` (the local Azure) and `up` (control
// planes, the cloud, a node and the product's components on this machine). It is a development
// and test tool; the product, cmd/cerulean, never links it. Each subcommand lives in its own file.
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
		Use:           "cerulean-local",
		Short:         "The local environment: a local Azure and whole systems on this machine, for development and tests",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(cli.NewVersionCommand("cerulean-local"), newUpCommand(), newCloudCommand())
	return root
}
