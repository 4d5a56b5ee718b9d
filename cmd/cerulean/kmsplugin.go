package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"github.com/spf13/cobra"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/kmsplugin"
)

func newKMSPluginCommand() *cobra.Command {
	o := kmsplugin.Options{}
	socket := ""
	cmd := &cobra.Command{
		Use:   "kms-plugin",
		Short: "Encrypt kube-apiserver's data in etcd with a Key Vault key (a KMS v2 plugin on a unix socket)",
		Long: `Serves the KMS v2 API on a unix socket for kube-apiserver's EncryptionConfiguration: the API
server's data encryption keys are wrapped and unwrapped with a Key Vault RSA key (RSA-OAEP-256).
The identity (AZURE_* variables, as the manager's) needs the Key Vault Crypto Service Encryption
User role on the key, or the keys get, wrapKey and unwrapKey access-policy permissions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := azure.ConfigFromEnv(os.Getenv)
			cred, err := env.Credential()
			if err != nil {
				return fmt.Errorf("the plugin's identity: %w", err)
			}
			so, err := env.SecretsOptions()
			if err != nil {
				return err
			}
			o.Credential = cred
			o.Client = &azkeys.ClientOptions{ClientOptions: so.ClientOptions, DisableChallengeResourceVerification: so.DisableChallengeResourceVerification}
			p, err := kmsplugin.New(o)
			if err != nil {
				return err
			}
			path := strings.TrimPrefix(socket, "unix://")
			fmt.Fprintf(cmd.ErrOrStderr(), "KMS v2 plugin for Key Vault key %s on %s\n", o.KeyName, path)
			return kmsplugin.Serve(cmd.Context(), p, path)
		},
	}
	f := cmd.Flags()
	f.StringVar(&socket, "listen-addr", "unix:///opt/cerulean-kms.socket", "the unix socket kube-apiserver's EncryptionConfiguration names (kms.endpoint)")
	f.StringVar(&o.VaultURL, "vault-url", "", "the vault's URI, https://NAME.vault.azure.net/ (required)")
	f.StringVar(&o.KeyName, "key-name", "", "the RSA key that wraps the API server's keys (required)")
	f.StringVar(&o.KeyVersion, "key-version", "", "pin one version of the key (default: its current version, followed across rotations)")
	return cmd
}
