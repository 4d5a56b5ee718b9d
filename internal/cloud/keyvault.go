package cloud

import (
	"context"

	kvarm "github.com/cerulean/cerulean/internal/cloud/arm/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/keyvault"
)

// Key Vault mounting (part 3). Kept apart from server.go so each part of the cloud owns its file.

// keyVaultParts are the data plane and its management-plane provider.
type keyVaultParts struct {
	data     *keyvault.Service
	provider *kvarm.Provider
}

// startKeyVault registers the Microsoft.KeyVault provider on ARM (before ARM starts) and serves
// every existing vault on its recorded port.
func (c *Cloud) startKeyVault(ctx context.Context, opts Options) error {
	tlsConfig := c.pki.TLSConfig()
	tlsConfig.NextProtos = []string{"h2", "http/1.1"}
	data, err := keyvault.New(ctx, keyvault.Options{
		Store: c.store, Tokens: c.entra, Authz: c.arm.Authz(), AuthorityURL: c.settings.URL,
		TLS: tlsConfig, Clock: opts.Clock, Logger: opts.Logger.With("service", "keyvault"),
		Limits: opts.KeyVaultLimits, Middleware: c.observeVault,
	})
	if err != nil {
		return err
	}
	c.keyVault = &keyVaultParts{data: data, provider: kvarm.Register(c.arm, data, opts.Logger.With("service", "arm.keyvault"))}
	if err := data.Start(ctx); err != nil {
		_ = data.Close()
		return err
	}
	return c.keyVault.provider.Start(ctx)
}

// KeyVault is the Key Vault data plane, for in-process callers (tests look up vaults).
func (c *Cloud) KeyVault() *keyvault.Service { return c.keyVault.data }

// closeKeyVault stops the vault listeners before the store closes.
func (c *Cloud) closeKeyVault() error {
	if c.keyVault == nil {
		return nil
	}
	c.keyVault.provider.Close()
	return c.keyVault.data.Close()
}
