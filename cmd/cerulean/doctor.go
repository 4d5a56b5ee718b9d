package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/doctor"
)

func newDoctorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Explain why a workload can or cannot get its Azure identity",
	}
	var namespace, scope string
	wiCmd := &cobra.Command{
		Use:   "workload-identity pod/NAME|sa/NAME",
		Short: "Check a pod's (or a service account's) workload identity step by step",
		Long: "Checks the pod's label, its service account's annotations, the webhook's mutation, the\n" +
			"cluster's issuer, the managed identity and its federated credentials, a real token exchange\n" +
			"and, with --scope, the identity's role assignments there. Each failing step says how to fix it.\n" +
			"Reads KUBECONFIG and the AZURE_* variables that `cerulean-local cloud env` prints.\n" +
			"Exit code 0: every step passed; 1: a step failed; 2: something could not be checked.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return doctor.RunWorkloadIdentity(cmd.Context(), doctor.CLIOptions{
				Namespace: namespace, Target: args[0], Scope: scope, Getenv: os.Getenv, Out: cmd.OutOrStdout(),
			})
		},
	}
	wiCmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the pod or service account")
	wiCmd.Flags().StringVar(&scope, "scope", "", "resource id whose role assignments for the identity to check")
	cmd.AddCommand(wiCmd)
	return cmd
}
