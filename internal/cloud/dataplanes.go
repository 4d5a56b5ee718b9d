package cloud

import (
	"context"
	"errors"
	"net/netip"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm/postgresql"
	"github.com/cerulean/cerulean/internal/cloud/arm/redis"
	"github.com/cerulean/cerulean/internal/cloud/engines"
)

// Data planes backed by real engines (part of the cloud's start). Kept apart from server.go so
// each part of the cloud owns its file.

type dataPlanes struct {
	sup      *engines.Supervisor
	postgres *postgresql.Provider
	redis    *redis.Provider
}

// registerEngines creates the engine supervisor and registers the providers whose resources
// are engines, before ARM resumes its operations.
func (c *Cloud) registerEngines(opts Options) error {
	sup, err := engines.New(engines.Options{Dir: c.settings.DataDir, CA: c.pki.CA,
		Logger: opts.Logger.With("service", "engines"), Now: opts.Clock, Net: opts.EngineNet})
	if err != nil {
		return err
	}
	c.engines = &dataPlanes{sup: sup, postgres: postgresql.Register(c.arm, sup), redis: redis.Register(c.arm, sup)}
	return nil
}

// startEngines brings back the engines that ran when the cloud last stopped (or was killed).
func (c *Cloud) startEngines(ctx context.Context) error {
	return errors.Join(c.engines.postgres.Start(ctx), c.engines.redis.Start(ctx))
}

// closeEngines stops every engine process the cloud started.
func (c *Cloud) closeEngines() error {
	if c.engines == nil {
		return nil
	}
	return c.engines.sup.Close()
}

// LookupDataPlane is the address a data plane's public name answers on, for the cloud's DNS:
// NAME.postgres.database.azure.com and NAME.redis.cache.windows.net of running servers and
// caches. A deleted, stopped or failed resource does not resolve. Every engine has an address of
// its own (in 127.0.0.0/8, or in Options.EngineNet for pods to reach) and its standard port
// there (or, when that port is taken, 127.0.0.1 and a port of its own: DataPlaneEndpoint has
// the port); see docs/cloud.md.
func (c *Cloud) LookupDataPlane(host string) (netip.Addr, bool) {
	ap, ok := c.DataPlaneEndpoint(host)
	return ap.Addr(), ok
}

// DataPlaneEndpoint is where a data plane's public name is served: the PostgreSQL port of a
// server, the TLS port of a cache.
func (c *Cloud) DataPlaneEndpoint(host string) (netip.AddrPort, bool) {
	if c.engines == nil {
		return netip.AddrPort{}, false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if name, ok := strings.CutSuffix(host, ".postgres.database.azure.com"); ok && !strings.Contains(name, ".") {
		return c.engines.sup.PostgresAddr(name)
	}
	if name, ok := strings.CutSuffix(host, ".redis.cache.windows.net"); ok && !strings.Contains(name, ".") {
		a, ok := c.engines.sup.RedisAddr(name)
		return a.TLS, ok
	}
	return netip.AddrPort{}, false
}

// RedisPlainEndpoint is a cache's non-TLS port, when enableNonSslPort opened it.
func (c *Cloud) RedisPlainEndpoint(name string) (netip.AddrPort, bool) {
	if c.engines == nil {
		return netip.AddrPort{}, false
	}
	a, ok := c.engines.sup.RedisAddr(strings.ToLower(name))
	return a.Plain, ok && a.Plain.IsValid()
}
