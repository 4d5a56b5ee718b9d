package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/rollout"
)

func newRolloutCommand() *cobra.Command {
	var file string
	var parallel int
	var dryRun bool
	var deployTimeout, verifyTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "rollout -f rollout.yaml",
		Short: "Give an app workload identity and Key Vault access on many AKS clusters, and deploy it",
		Long: "For each cluster of the file: enable the OIDC issuer and workload identity, create or reuse the\n" +
			"cluster's managed identity, federate the app's service account, grant the identity the role on\n" +
			"the shared Key Vault, install or upgrade the app's chart with the identity's client id, and verify\n" +
			"that the service account's token reads the vault. Each step checks before it acts: a re-run\n" +
			"resumes after a failure and changes nothing already done. Reads the AZURE_* variables that\n" +
			"`cerulean-local cloud env` prints. Exit code 1 when a cluster failed. See docs/rollout.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rollout.RunCLI(cmd.Context(), rollout.CLIOptions{
				File: file, Parallel: parallel, DryRun: dryRun, Getenv: os.Getenv,
				DeployTimeout: deployTimeout, VerifyTimeout: verifyTimeout,
				Out: cmd.OutOrStdout(), Progress: cmd.ErrOrStderr(),
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the rollout file (required)")
	cmd.Flags().IntVar(&parallel, "parallel", 4, "clusters rolled out at once")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	cmd.Flags().DurationVar(&deployTimeout, "deploy-timeout", 5*time.Minute, "bound on each cluster's Helm install or upgrade")
	cmd.Flags().DurationVar(&verifyTimeout, "verify-timeout", 2*time.Minute, "how long verify retries while Azure propagates a new federated credential or role")
	_ = cmd.MarkFlagRequired("file")

	var revokeFile, cluster string
	revoke := &cobra.Command{
		Use:   "revoke -f rollout.yaml --cluster NAME",
		Short: "Remove one cluster's role assignment on the vault; the other clusters keep theirs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rollout.RunRevokeCLI(cmd.Context(), rollout.RevokeCLIOptions{
				File: revokeFile, Cluster: cluster, Getenv: os.Getenv, Out: cmd.OutOrStdout(),
			})
		},
	}
	revoke.Flags().StringVarP(&revokeFile, "file", "f", "", "the rollout file (required)")
	revoke.Flags().StringVar(&cluster, "cluster", "", "the cluster's name, as the last segment of its id (required)")
	_ = revoke.MarkFlagRequired("file")
	_ = revoke.MarkFlagRequired("cluster")
	cmd.AddCommand(revoke)
	return cmd
}
