// Package cloud is Cerulean's local Azure: one HTTPS listener serving Entra ID (and, in later
// parts, ARM, Key Vault and the managed-identity endpoints) with its state in one data directory.
package cloud

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"

	"github.com/cerulean/cerulean/internal/cloud/admin"
	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/cloud/pki"
	"github.com/cerulean/cerulean/internal/cloud/proxy"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/cloud/storage"
	"github.com/cerulean/cerulean/internal/cloud/store"
	"github.com/cerulean/cerulean/internal/cloud/webview"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/shellenv"
)

// Options configure a cloud.
type Options struct {
	Addr         string   // listen address; "127.0.0.1:0" picks a free port
	DataDir      string   // state, CA and env file; created if missing
	TrustCAFiles []string // extra CAs for outbound HTTPS (federated issuers), besides system roots
	TrustCAs     [][]byte // the same, as PEM, for in-process callers
	Clock        func() time.Time
	Logger       *slog.Logger // nil = discard; never receives secrets or tokens
	ARM          arm.Config   // ARM's tunables: LRO Retry-After, throttling limits, body cap
	// Throttle turns on Azure's default limits (ARM per subscription and principal, Key Vault
	// per vault) where ARM.Limits or KeyVaultLimits do not set others. Off by default.
	Throttle       bool
	KeyVaultLimits *keyvault.Limits // per-vault throttling; nil = none unless Throttle
	Faults         *faults.Config   // fault rules active from the start; the admin API changes them
	RequestLogSize int              // requests the log keeps; 0 = reqlog.DefaultSize
	// ProxyAddr is where the forward proxy for Azure's public names listens ("0" or a port
	// 0 picks a free loopback port); empty runs no proxy. `cerulean-local cloud` defaults to
	// DefaultProxyAddr.
	ProxyAddr string
	// EngineNet is where the PostgreSQL servers and Redis caches take their addresses when pods
	// must reach them (`up` with a node: devenv.EngineCIDR): a /24 of it per data dir, made
	// local to the host by a route the cloud adds and removes (needs root). Zero: addresses in
	// 127.0.0.0/8, which only the host reaches.
	EngineNet netip.Prefix
	// AzuriteDir is the Azurite install the storage data planes run (hack/install-azurite.sh);
	// empty finds bin/azurite (storage.DefaultAzuriteDir).
	AzuriteDir string
}

// Settings are what a client needs to use the cloud.
type Settings struct {
	URL                     string // https://HOST:PORT, the address really served
	TenantID                string
	SubscriptionID          string
	ClientID                string // the bootstrap service principal, Owner of the subscription
	ObjectID                string
	ClientSecret            string
	ClientCertificatePath   string // PEM: certificate, then key
	AuthorityHost           string // URL + "/"
	ResourceManagerEndpoint string
	ResourceManagerAudience string
	CAFile                  string
	DataDir                 string
	ProxyURL                string // http://HOST:PORT of the forward proxy (HTTPS_PROXY); empty without one
	// CredentialsAuthorityHost is the authentication_endpoint of the managed identities'
	// credentials the cloud issues (the managed-identity data plane, the admin route): where
	// the component holding them authenticates. With the proxy it is Azure's public authority,
	// https://login.microsoftonline.com/, as Azure writes it and as the proxy serves it to pods
	// and other clients that cannot reach loopback; without one, AuthorityHost.
	CredentialsAuthorityHost string
	// WebViewURL is the read-only web view; a browser logs in once at
	// WebViewURL+"login?token=" + the content of WebViewTokenFile (0600 in the data dir).
	WebViewURL       string
	WebViewTokenFile string
}

// ResourceManagerAudience is the audience ARM tokens are requested for, as in the public cloud.
const ResourceManagerAudience = "https://management.core.windows.net/"

// Files in the data directory.
const (
	stateFile = "state.db"
	EnvFile   = "env" // `export NAME=VALUE` lines, written atomically once the cloud is ready
)

// Cloud is a running local cloud.
type Cloud struct {
	settings Settings
	pki      *pki.PKI
	store    *store.Store
	entra    *entra.Service
	arm      *arm.Service
	msi      *msi.Service
	keyVault *keyVaultParts
	storage  *storage.Service
	azurite  *storage.Azurite
	engines  *dataPlanes
	srv      *http.Server
	// handler serves Entra ID, ARM, the managed-identity endpoints and the admin API: what the
	// main listener serves, and what any other front for those services (a forward proxy) must
	// serve too, so that it keeps httpx.CompleteBody and the request log.
	handler  http.Handler
	proxy    *proxy.Proxy
	names    names // DNS for Azure's names and the HTTPS front (names.go)
	inflight httpx.InFlight
	served   chan error
	log      *slog.Logger
	faults   *faults.Injector
	requests *reqlog.Log
	view     *webview.View
	now      func() time.Time

	closeOnce sync.Once
	closeErr  error
}

// Start opens the state in opts.DataDir (bootstrapping it on first use), listens, and returns
// once the cloud serves and its env file is written.
func Start(ctx context.Context, opts Options) (*Cloud, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	// The admin API moves every service's clock forward at once (POST /clock/advance).
	skew, baseClock := &admin.Skew{}, opts.Clock
	opts.Clock = func() time.Time { return baseClock().Add(time.Duration(skew.Load())) }
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:8443"
	}
	opts.applyThrottle()
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	// The env file signals readiness: a stale one from an earlier run must not announce this
	// start. Removed only once the state lock is ours, so a running cloud's file is never touched.
	if err := os.Remove(filepath.Join(dir, EnvFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = st.Close()
		return nil, fmt.Errorf("remove stale env file: %w", err)
	}
	// On any failure below, undo what was started, newest first: a failed start must leave no
	// listener (the main one or a vault's) or background operation behind.
	var c *Cloud
	var ln net.Listener
	ok := false
	defer func() {
		if ok {
			return
		}
		if c != nil {
			_ = c.closeProxy()
			if c.srv != nil {
				_ = c.srv.Close()
			}
			c.closeARM()
			_ = c.closeKeyVault()
			_ = c.closeStorage()
		}
		if ln != nil {
			_ = ln.Close()
		}
		_ = st.Close()
	}()
	// Certificates after the lock: two clouds starting on one new directory must not both create a CA.
	certs, err := pki.Ensure(dir, opts.Clock())
	if err != nil {
		return nil, err
	}
	outbound, err := outboundTransport(opts, certs.CAPEM)
	if err != nil {
		return nil, err
	}
	c = &Cloud{pki: certs, store: st, served: make(chan error, 1), log: opts.Logger}
	if err := c.startFaults(opts); err != nil {
		return nil, err
	}

	ln, err = net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
	}
	base := "https://" + publicHostPort(opts.Addr, ln.Addr())

	boot, err := ensureBootstrap(ctx, st, entra.NewDirectory(st, opts.Clock), dir, opts.Clock, opts.Logger)
	if err != nil {
		return nil, err
	}
	c.entra, err = entra.New(ctx, entra.Options{
		Store: st, BaseURL: base, Clock: opts.Clock, Logger: opts.Logger.With("service", "entra"),
		IssuerClient: entra.NewIssuerClient(outbound), ADFSTenant: boot.TenantID,
	})
	if err != nil {
		return nil, err
	}
	c.settings = Settings{
		URL: base, TenantID: boot.TenantID, SubscriptionID: boot.SubscriptionID,
		ClientID: boot.ClientID, ObjectID: boot.ObjectID, ClientSecret: boot.ClientSecret,
		ClientCertificatePath: boot.ClientCertPath, AuthorityHost: base + "/",
		ResourceManagerEndpoint: base, ResourceManagerAudience: ResourceManagerAudience,
		CAFile: certs.CAFile, DataDir: dir, CredentialsAuthorityHost: base + "/",
	}
	if opts.ProxyAddr != "" { // the proxy starts below, or Start fails
		c.settings.CredentialsAuthorityHost = azurenames.AuthorityHost
	}

	if err := c.startARM(ctx, opts, boot); err != nil {
		return nil, err
	}
	if err := c.startWebView(boot); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	c.entra.Register(mux)
	c.registerMetadata(mux)
	c.registerVaultLookup(mux)
	if err := c.startMSI(mux); err != nil {
		return nil, err
	}
	admin.New(admin.Options{
		Entra: c.entra, TenantID: boot.TenantID, OwnerObjectID: boot.ObjectID, Audience: ResourceManagerAudience,
		Logger: opts.Logger.With("service", "admin"), Clock: opts.Clock,
		Faults: c.faults, Requests: c.requests, CA: c.pki.CA, CredentialsAuthorityHost: c.settings.CredentialsAuthorityHost,
		Skew: skew,
	}).Register(mux)
	c.registerIdentityDataPlane(mux, opts)
	mux.Handle("/", c.entra.NotFound())
	c.handler = httpx.CompleteBody(servePathsAsSent(c.observe(serviceOf, "", c.withARM(mux))))
	c.srv = &http.Server{
		Handler:           c.inflight.Wrap(c.withWebView(c.handler)),
		TLSConfig:         withHTTP2(certs.TLSConfig()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute, // keep-alive connections of gone clients do not pile up
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	go func() { c.served <- c.srv.Serve(tls.NewListener(ln, c.srv.TLSConfig)) }()
	if err := c.startProxy(opts); err != nil {
		return nil, err
	}

	if err := fsutil.WriteFileAtomic(filepath.Join(dir, EnvFile), []byte(FormatEnv(c.Env())), 0o600); err != nil {
		return nil, fmt.Errorf("write env file: %w", err)
	}
	ok = true
	opts.Logger.Info("Cloud ready", "url", base, "proxy", c.settings.ProxyURL, "dataDir", dir, "tenantId", boot.TenantID,
		"webView", c.settings.WebViewURL, "webViewTokenFile", c.settings.WebViewTokenFile)
	return c, nil
}

// publicHostPort is the host:port to put in URLs: the requested host (an IP or localhost, which
// the serving certificate covers) with the port really bound; an unspecified host becomes
// 127.0.0.1.
func publicHostPort(requested string, bound net.Addr) string {
	port := strconv.Itoa(bound.(*net.TCPAddr).Port)
	host, _, err := net.SplitHostPort(requested)
	if ip := net.ParseIP(host); err != nil || host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Settings returns the cloud's settings.
func (c *Cloud) Settings() Settings { return c.settings }

// Entra is the Entra ID service, for in-process callers that manage principals.
func (c *Cloud) Entra() *entra.Service { return c.entra }

// Store is the cloud's state, for services added in later parts.
func (c *Cloud) Store() *store.Store { return c.store }

// Env returns the NAME=VALUE lines `cerulean-local cloud env` prints (without "export "). Values are
// quoted for a POSIX shell where needed.
func (c *Cloud) Env() []string {
	s := c.settings
	pairs := [][2]string{
		{"AZURE_TENANT_ID", s.TenantID},
		{"AZURE_SUBSCRIPTION_ID", s.SubscriptionID},
		{"AZURE_CLIENT_ID", s.ClientID},
		{"AZURE_CLIENT_SECRET", s.ClientSecret},
		{"AZURE_CLIENT_CERTIFICATE_PATH", s.ClientCertificatePath},
		{"AZURE_AUTHORITY_HOST", s.AuthorityHost},
		{"AZURE_RESOURCE_MANAGER_ENDPOINT", s.ResourceManagerEndpoint},
		{"AZURE_RESOURCE_MANAGER_AUDIENCE", s.ResourceManagerAudience},
		{"SSL_CERT_FILE", s.CAFile},
		{"CERULEAN_CLOUD_DATA_DIR", s.DataDir},
	}
	out := make([]string, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, p[0]+"="+shellenv.Quote(p[1]))
	}
	return out
}

// ClientOptions configure an Azure SDK client for this cloud: its authority and ARM endpoint,
// and a transport that trusts the cloud's CA without relying on SSL_CERT_FILE.
func (c *Cloud) ClientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{
		Cloud: azcloud.Configuration{
			ActiveDirectoryAuthorityHost: c.settings.AuthorityHost,
			Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
				azcloud.ResourceManager: {Audience: c.settings.ResourceManagerAudience, Endpoint: c.settings.ResourceManagerEndpoint},
			},
		},
		Transport: &http.Client{Transport: c.Transport()},
	}
}

// Transport is an HTTP transport trusting the cloud's CA (and the system roots).
func (c *Cloud) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	pool, err := pki.Pool(c.pki.CAPEM)
	if err != nil {
		pool = c.pki.Pool // the CA was parsed at start; this cannot happen
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t
}

// Close stops serving and releases the state file; later calls return the first call's result.
func (c *Cloud) Close() error {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := errors.Join(c.closeNames(), c.closeProxy())
		err = errors.Join(err, httpx.Shutdown(ctx, c.srv, &c.inflight))
		c.closeARM()
		err = errors.Join(err, c.closeEngines())
		err = errors.Join(err, c.closeKeyVault())
		err = errors.Join(err, c.closeStorage())
		if serr := <-c.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		c.closeErr = errors.Join(err, c.store.Close())
	})
	return c.closeErr
}

// outboundTransport trusts the system roots, the --trust-ca files and PEMs, and the cloud's own CA
// (so issuers the cloud itself serves are reachable).
func outboundTransport(opts Options, ownCA []byte) (*http.Transport, error) {
	extra := append([][]byte{ownCA}, opts.TrustCAs...)
	for _, f := range opts.TrustCAFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read trusted CA: %w", err)
		}
		extra = append(extra, b)
	}
	pool, err := pki.Pool(extra...)
	if err != nil {
		return nil, fmt.Errorf("load trusted CAs: %w", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	t.ResponseHeaderTimeout = 10 * time.Second
	return t, nil
}
