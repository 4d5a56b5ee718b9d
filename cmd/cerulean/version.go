package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "cerulean %s (commit %s)\n", version.Version, version.Commit)
			return err
		},
	}
}
