package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/csiprovider"
)

func newCSIProviderCommand() *cobra.Command {
	o := csiprovider.Options{}
	socket, verbose := "", false
	cmd := &cobra.Command{
		Use:   "csi-provider",
		Short: "Serve Key Vault objects to the Secrets Store CSI Driver (provider azure) on a unix socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			env := azure.ConfigFromEnv(os.Getenv)
			o.Azure.AuthorityHost, o.Azure.CAFile = env.AuthorityHost, env.CAFile
			return csiprovider.Run(cmd.Context(), o, socket)
		},
	}
	f := cmd.Flags()
	f.StringVar(&socket, "socket", csiprovider.DefaultSocket, "unix socket the driver connects to (PROVIDERS_DIR/azure.sock)")
	f.DurationVar(&o.CacheTTL, "cache-ttl", time.Minute, "how long the latest version of an object is served from the cache (the staleness bound); 0 turns the cache off")
	f.StringVar(&o.CloudName, "cloud-name", "", "the name SecretProviderClasses may give this provider's own cloud (default AzurePublicCloud)")
	f.StringVar(&o.VaultLookupURL, "vault-lookup-url", "", "the local cloud's vault lookup, AZURE_AUTHORITY_HOST + _cerulean/vaults/ (empty in Azure)")
	f.StringVar(&o.PodIdentityEndpoint, "pod-identity-endpoint", "http://127.0.0.1:2579", "the node agent's address for usePodIdentity")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "127.0.0.1:8898", `address of the metrics endpoint (the upstream provider's port; "0" turns it off)`)
	f.BoolVarP(&verbose, "verbose", "v", false, "log every mount")
	return cmd
}
