package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/importer"
)

func newImportCommand() *cobra.Command {
	var o importer.CLIOptions
	cmd := &cobra.Command{
		Use:   "import ARMID...",
		Short: "Write the manifests that adopt existing Azure resources and their children",
		Long: "Reads each resource (a resource group: everything in it) and its children from ARM and writes\n" +
			"manifests for them: Cerulean's typed kinds where it has one, the generic kind AzureResource\n" +
			"otherwise, owners linked by name. Secrets are never written: a secret input such as a server's\n" +
			"administrator password is left out (or, with --secret-references, read from a Secret you create).\n" +
			"Applied, the objects adopt the resources: with the default policy the manager reads them and\n" +
			"writes nothing while Azure matches the spec; --reconcile-policy skip never writes at all.\n" +
			"Nothing is written unless every resource could be read. Reads the AZURE_* variables that\n" +
			"`cerulean-local cloud env` prints. See docs/resources.md#import-what-exists.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.IDs, o.Getenv, o.Out = args, os.Getenv, cmd.OutOrStdout()
			return importer.RunCLI(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Output, "output", "o", "", "directory to write one file per manifest into (default: stdout)")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "metadata.namespace of the manifests (default: none, kubectl's -n decides)")
	f.StringVar(&o.ReconcilePolicy, "reconcile-policy", "", "serviceoperator.azure.com/reconcile-policy of the manifests: manage, skip or detach-on-delete (default: none, which is manage)")
	f.BoolVar(&o.SecretReferences, "secret-references", false, "write secret inputs as references to Secrets you create (the manager then sets them in Azure)")
	f.StringArrayVar(&o.APIVersions, "api-version", nil, "TYPE=VERSION for a type without a typed kind (default: its provider's newest stable version)")
	return cmd
}
