package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/faults"
)

// defaultCloudDataDir is $CERULEAN_CLOUD_DATA_DIR, else .cerulean/cloud.
func defaultCloudDataDir() string {
	if d := os.Getenv("CERULEAN_CLOUD_DATA_DIR"); d != "" {
		return d
	}
	return ".cerulean/cloud"
}

func newCloudCommand() *cobra.Command {
	opts := cloud.Options{}
	verbose := false
	faultsFile := ""
	cmd := &cobra.Command{
		Use:   "cloud",
		Short: "Run the local Azure (Entra ID, ARM, Key Vault, managed-identity endpoints) over HTTPS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if faultsFile != "" {
				cfg, err := faults.Load(faultsFile)
				if err != nil {
					return err
				}
				opts.Faults = &cfg
			}
			return cloud.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:8443", "HTTPS listen address (port 0 picks a free port)")
	cmd.Flags().StringVar(&opts.DataDir, "data-dir", defaultCloudDataDir(), "state, CA and env file; $CERULEAN_CLOUD_DATA_DIR sets the default")
	cmd.Flags().StringArrayVar(&opts.TrustCAFiles, "trust-ca", nil, "extra CA bundle (PEM) to trust for federated issuers, besides the system roots; repeatable")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every request")
	cmd.Flags().DurationVar(&opts.ARM.RetryAfter, "arm-retry-after", 0, "poll interval ARM advertises on long-running operations (default 1s)")
	cmd.Flags().BoolVar(&opts.Throttle, "throttle", false, "apply Azure's request limits: ARM reads 250 (+25/s) and writes 200 (+10/s) per subscription and principal, Key Vault 2000 per 10 s per vault")
	cmd.Flags().StringVar(&opts.ProxyAddr, "proxy-addr", cloud.DefaultProxyAddr, "forward proxy for Azure's public names (HTTPS_PROXY); 0 picks a free port, empty runs none")
	cmd.Flags().StringVar(&faultsFile, "faults", "", "fault rules (JSON or YAML) active from the start; the admin API changes them later")
	cmd.AddCommand(newCloudEnvCommand())
	return cmd
}

func newCloudEnvCommand() *cobra.Command {
	dataDir, compute := "", ""
	viaProxy := false
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the shell exports that point Azure clients at the local cloud",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if compute != "" && viaProxy {
				return fmt.Errorf("--compute and --proxy exclude each other")
			}
			if compute != "" {
				return cloud.PrintComputeEnv(cmd.OutOrStdout(), dataDir, compute)
			}
			if viaProxy {
				return cloud.PrintProxyEnv(cmd.OutOrStdout(), dataDir)
			}
			return cloud.PrintEnv(cmd.OutOrStdout(), dataDir)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultCloudDataDir(), "the cloud's data directory; $CERULEAN_CLOUD_DATA_DIR sets the default")
	cmd.Flags().BoolVar(&viaProxy, "proxy", false, "print what a client with default settings needs: HTTPS_PROXY, NO_PROXY, the CA and the bootstrap principal, no endpoints")
	cmd.Flags().StringVar(&compute, "compute", "", "print only IDENTITY_ENDPOINT, IDENTITY_HEADER and SSL_CERT_FILE for code on this VM or scale set (resource id)")
	return cmd
}
