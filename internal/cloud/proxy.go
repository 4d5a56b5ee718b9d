package cloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/proxy"
	"github.com/cerulean/cerulean/internal/cloud/storage"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/shellenv"
)

// The forward proxy for Azure's public names (issue 17). Kept apart from server.go so each part
// of the cloud owns its file.

// DefaultProxyAddr is where `cerulean-local cloud` and `cerulean-local up` run the proxy unless told.
const DefaultProxyAddr = "127.0.0.1:8444"

// ProxyEnvFile holds the exports of a client that reaches the cloud through the proxy with its
// default settings (`cerulean-local cloud env --proxy`); written before EnvFile, removed at start.
const ProxyEnvFile = "proxy.env"

// NoProxy is the NO_PROXY a proxy client gets: loopback, where the cloud's own origins, the
// vaults' loopback origins and the local control plane listen.
const NoProxy = "127.0.0.1,localhost,::1"

// startProxy starts the proxy when opts.ProxyAddr asks for one and writes its env file.
func (c *Cloud) startProxy(opts Options) error {
	path := filepath.Join(c.settings.DataDir, ProxyEnvFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale proxy env file: %w", err)
	}
	if opts.ProxyAddr == "" {
		return nil
	}
	addr := opts.ProxyAddr
	if addr == "0" {
		addr = "127.0.0.1:0"
	}
	p, err := proxy.Start(proxy.Options{
		Addr: addr, CA: c.pki.CA, Route: c.routePublic, Clock: opts.Clock,
		HTTP1Only: func(host string) bool { _, _, ok := storage.ParseHost(host); return ok }, // as Azure Storage
		Logger:    opts.Logger.With("service", "proxy"),
	})
	if err != nil {
		return err
	}
	c.proxy = p
	c.settings.ProxyURL = "http://" + publicHostPort(addr, p.ListenAddr())
	if err := fsutil.WriteFileAtomic(path, []byte(FormatEnv(c.ProxyEnv())), 0o600); err != nil {
		return fmt.Errorf("write proxy env file: %w", err)
	}
	return nil
}

// routePublic names the in-process handler of a public host: Entra ID and ARM share the
// cloud's main handler (which answers by the request's host), a vault its own.
func (c *Cloud) routePublic(ctx context.Context, host string) (http.Handler, error) {
	switch {
	case azurenames.IsEntra(host), azurenames.IsManagement(host):
		return c.srv.Handler, nil
	}
	if _, _, ok := storage.ParseHost(host); ok {
		h, err := c.storage.Handler(ctx, host)
		if errors.Is(err, storage.ErrAccountNotFound) {
			return nil, fmt.Errorf("no storage account for %s: %w", host, proxy.ErrNotServed)
		}
		return h, err
	}
	name, ok := azurenames.VaultName(host)
	if !ok {
		return nil, proxy.ErrNotServed
	}
	h, err := c.keyVault.data.PublicHandler(ctx, name)
	if errors.Is(err, keyvault.ErrVaultNotFound) {
		return nil, fmt.Errorf("no vault named %s: %w", name, proxy.ErrNotServed)
	}
	return h, err
}

// ServeProxyOn serves the forward proxy on addr as well (`up`: the node's address, which pods
// reach and loopback is not) and returns its URL there, the HTTPS_PROXY of a pod.
func (c *Cloud) ServeProxyOn(addr string) (string, error) {
	if c.proxy == nil {
		return "", errors.New("serve the proxy on another address: the cloud runs without a proxy")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("serve the proxy on %s: %w", addr, err)
	}
	c.proxy.ServeAlso(ln)
	return "http://" + ln.Addr().String(), nil
}

// Proxy is the forward proxy, nil when the cloud runs without one.
func (c *Cloud) Proxy() *proxy.Proxy { return c.proxy }

// ProxyEnv returns the NAME=VALUE lines of a client that uses the cloud through its proxy with
// default settings: the proxy, the CA for every runtime's trust setting, and the bootstrap
// principal. No endpoint is overridden: the client's public-cloud defaults are the point.
func (c *Cloud) ProxyEnv() []string {
	s := c.settings
	pairs := [][2]string{
		{"HTTPS_PROXY", s.ProxyURL},
		{"NO_PROXY", NoProxy},
		{"SSL_CERT_FILE", s.CAFile},       // Go, OpenSSL-based tools
		{"REQUESTS_CA_BUNDLE", s.CAFile},  // Python requests: the Azure CLI
		{"NODE_EXTRA_CA_CERTS", s.CAFile}, // Node.js: the JavaScript SDK
		{"AZURE_TENANT_ID", s.TenantID},
		{"AZURE_SUBSCRIPTION_ID", s.SubscriptionID},
		{"AZURE_CLIENT_ID", s.ClientID},
		{"AZURE_CLIENT_SECRET", s.ClientSecret},
	}
	out := make([]string, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, p[0]+"="+shellenv.Quote(p[1]))
	}
	return out
}

// ReadProxyEnv returns the exports a cloud with this data directory wrote for proxy clients.
func ReadProxyEnv(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, ProxyEnvFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no cloud with a proxy has started with data dir %s (run `cerulean-local cloud --data-dir %s`; --proxy-addr must not be empty): %w", dataDir, dataDir, err)
	}
	if err != nil {
		return "", fmt.Errorf("read proxy env: %w", err)
	}
	return string(b), nil
}

// closeProxy stops the proxy (before the handlers it serves go away).
func (c *Cloud) closeProxy() error {
	if c.proxy == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.proxy.Close(ctx)
	c.proxy = nil
	return err
}
