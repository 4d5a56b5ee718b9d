package cloud

import (
	"context"
	"path/filepath"

	armstorage "github.com/cerulean/cerulean/internal/cloud/arm/storage"
	"github.com/cerulean/cerulean/internal/cloud/storage"
)

// The storage data planes (issue 23): one Azurite behind the front of internal/cloud/storage,
// under the accounts' public names. Kept apart from server.go so each part of the cloud owns
// its file.

// startStorage connects the Microsoft.Storage provider to the data planes and, when accounts
// exist, starts Azurite in the background (requests wait for it).
func (c *Cloud) startStorage(ctx context.Context, opts Options, provider *armstorage.Provider) error {
	c.azurite = storage.NewAzurite(storage.AzuriteOptions{
		Dir: opts.AzuriteDir, DataDir: filepath.Join(c.settings.DataDir, "azurite"),
		Logger: opts.Logger.With("service", "azurite"),
	})
	c.storage = storage.New(storage.Options{
		Accounts: provider, Tokens: c.entra, Authz: c.arm.Authz(), Azurite: c.azurite,
		Clock: opts.Clock, Logger: opts.Logger.With("service", "storage"),
	})
	provider.SetDataPlane(c.storage)
	names, err := provider.Accounts(ctx)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		if err := c.azurite.Start(); err != nil {
			// The data planes answer 503 with this error until Azurite can start.
			c.log.Warn("Azurite did not start", "err", err)
		}
		provider.WatchEngine() // accounts end Failed should Azurite not start
	}
	return nil
}

// Storage is the storage data planes' front, for in-process callers.
func (c *Cloud) Storage() *storage.Service { return c.storage }

// Azurite is the storage engine's process, for in-process callers (tests).
func (c *Cloud) Azurite() *storage.Azurite { return c.azurite }

// closeStorage stops Azurite (it saves its data on SIGTERM).
func (c *Cloud) closeStorage() error {
	if c.azurite == nil {
		return nil
	}
	return c.azurite.Close()
}
