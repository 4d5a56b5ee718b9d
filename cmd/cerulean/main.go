// Command cerulean is the single binary of Cerulean; each subcommand lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		code := 1
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		if errors.Unwrap(err) != nil || ec == nil {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		stop()
		os.Exit(code)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "cerulean",
		Short:         "Azure identities, resources and Key Vault secrets for Kubernetes workloads",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newUpCommand(), newCloudCommand(), newManagerCommand(), newCSIProviderCommand(), newNodeAgentCommand(), newDoctorCommand(), newRolloutCommand())
	return root
}
