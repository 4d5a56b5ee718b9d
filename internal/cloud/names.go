package cloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/clouddns"
	"github.com/cerulean/cerulean/internal/cloud/proxy"
)

// Azure's public names for clients that resolve them (issue 23): the cloud's DNS answers each
// name it serves with an address where it serves that name, and HTTPS on port 443 of that
// address picks the certificate and the service by SNI. A pod whose DNS forwards Azure's zones
// here needs only the cloud's CA: no proxy, no endpoint settings.

// names is the state of the DNS server and of the HTTPS front it points at.
type names struct {
	mu    sync.Mutex
	dns   []*clouddns.Server
	front netip.Addr // where HTTPS by SNI is served; invalid until ServeHTTPSOn
}

// ServeHTTPSOn serves HTTPS on addr for every public name the cloud serves (SNI picks the
// certificate, which the cloud's CA issues, and the service), until Close; the cloud's DNS
// then answers those names with addr's IP. Pods' SDKs connect to port 443, so addr is the
// node's address at 443 under `up`. It needs the forward proxy (the two share certificates).
func (c *Cloud) ServeHTTPSOn(addr string) error {
	if c.proxy == nil {
		return errors.New("serve HTTPS for Azure's names: the cloud runs without a proxy")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve HTTPS for Azure's names on %s: %w", addr, err)
	}
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("serve HTTPS for Azure's names on %s: %w", addr, err)
	}
	c.proxy.ServeTLS(ln)
	c.names.mu.Lock()
	c.names.front = ap.Addr().Unmap()
	c.names.mu.Unlock()
	return nil
}

// ServeDNSOn answers DNS queries for Azure's zones (clouddns.Zones) on addr, UDP and TCP, until
// Close, and returns the address it listens on.
func (c *Cloud) ServeDNSOn(addr string) (string, error) {
	s, err := clouddns.Start(clouddns.Options{Addr: addr, Lookup: c.lookupName, Logger: c.log.With("service", "dns")})
	if err != nil {
		return "", err
	}
	c.names.mu.Lock()
	c.names.dns = append(c.names.dns, s)
	c.names.mu.Unlock()
	return s.Addr(), nil
}

// lookupName answers a name of Azure's zones: a data plane's own address (LookupDataPlane:
// running PostgreSQL servers and Redis caches), else the HTTPS front's address when the cloud
// serves the name over HTTPS now; NXDOMAIN otherwise (a deleted vault, a name never created,
// or no front yet).
func (c *Cloud) lookupName(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, ok := c.LookupDataPlane(host); ok {
		return []netip.Addr{a}, nil
	}
	c.names.mu.Lock()
	front := c.names.front
	c.names.mu.Unlock()
	if !front.IsValid() || !azurenames.Allowed(host) {
		return nil, clouddns.ErrNotFound
	}
	if _, err := c.routePublic(ctx, host); err != nil {
		if errors.Is(err, proxy.ErrNotServed) {
			return nil, clouddns.ErrNotFound
		}
		return nil, err
	}
	return []netip.Addr{front}, nil
}

// closeNames stops the DNS servers (the HTTPS front closes with the proxy).
func (c *Cloud) closeNames() error {
	c.names.mu.Lock()
	defer c.names.mu.Unlock()
	var err error
	for _, s := range c.names.dns {
		err = errors.Join(err, s.Close())
	}
	c.names.dns = nil
	return err
}
