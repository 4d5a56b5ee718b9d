// Package cli is what the two commands, cerulean (the product) and cerulean-local (the local
// environment), share: running a root command with signals and exit codes, and `version`.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/version"
)

// Main runs root until it returns or SIGINT/SIGTERM cancels its context, and exits with the
// error's ExitCode() when it has one (doctor, rollout), else 1. An error that only carries an
// exit code (nothing wrapped) was already reported by the command and is not printed again.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
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

// NewVersionCommand prints "NAME VERSION (commit COMMIT)".
func NewVersionCommand(name string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s (commit %s)\n", name, version.Version, version.Commit)
			return err
		},
	}
}
